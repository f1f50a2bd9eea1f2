// The chunkwise-parallel form (core/rules/additive_chunked.hpp) against the recurrent rules it claims to
// equal: linear attention (core/rules/linear), RetNet (retnet/) and Mamba-2 (mamba2/), run step by step
// through their own step(). In mp50 the two must agree to the working precision for every chunk size
// (T not a multiple of it included); in float and bfloat16 both are measured against the mp50 truth.
#include "core/feature_map.hpp"
#include "core/rules/additive_chunked.hpp"
#include "core/rules/linear/rule.hpp"
#include "core/rules/mamba2/rule.hpp"
#include "core/rules/retnet/rule.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <string>

namespace {

using namespace vla;

// One sequence of raw inputs (rows are tokens) and its decay logits; values in double.
struct Sequence {
  Mat<double> q, k, v;
  Vec<double> g;
};

Sequence random_sequence(int T, int d, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> n(0.0, 1.0);
  Sequence s{Mat<double>(T, d), Mat<double>(T, d), Mat<double>(T, d), Vec<double>(T)};
  for (auto* m : {&s.q, &s.k, &s.v})
    for (auto& e : m->reshaped()) e = n(gen);
  for (auto& e : s.g) e = 2.0 + n(gen);  // sigmoid(g) ~ 0.88: decays that matter over a chunk
  return s;
}

// The rule `Rule` in precision P stepped over the sequence (batch 1): the outputs as rows, in double.
template <class Rule> Mat<double> recurrent(const Rule& rule, const Sequence& s) {
  using S = typename Rule::storage_t;
  const int T = int(s.q.rows()), d = int(s.q.cols());
  auto st = rule.init(1, d);
  HeadInputs<S> in;
  Mat<S> out;
  Mat<double> O(T, d);
  for (int t = 0; t < T; ++t) {
    in.q = cast_matrix<S>(Mat<double>(s.q.row(t).transpose()));
    in.k = cast_matrix<S>(Mat<double>(s.k.row(t).transpose()));
    in.v = cast_matrix<S>(Mat<double>(s.v.row(t).transpose()));
    in.gate = Vec<S>::Constant(1, scalar_cast<S>(s.g(t)));
    rule.step(st, in, out, nullptr);
    O.row(t) = cast_matrix<double>(out).transpose();
  }
  return O;
}

// The chunked form of rule `name` in scalar T: the inputs rounded to T first (as the recurrent rule
// stores them), the features and decays computed in T as the rule computes them.
template <class T> Mat<double> chunked(const std::string& name, const Sequence& s, int chunk) {
  const Mat<T> q = cast_matrix<T>(s.q), k = cast_matrix<T>(s.k), v = cast_matrix<T>(s.v);
  const Eigen::Index len = q.rows();
  if (name == "linear") {
    Mat<T> fq(len, q.cols()), fk(len, k.cols());
    for (Eigen::Index t = 0; t < len; ++t) {
      fq.row(t) = elu_plus_one(Vec<T>(q.row(t).transpose())).transpose();
      fk.row(t) = elu_plus_one(Vec<T>(k.row(t).transpose())).transpose();
    }
    const T eps = scalar_cast<T>(FastWeightOptions{}.eps);
    return cast_matrix<double>(additive_chunked<T>(fq, fk, v, Vec<T>::Ones(len), chunk, true, eps).O);
  }
  Vec<T> gamma(len);
  for (Eigen::Index t = 0; t < len; ++t)
    gamma(t) = name == "retnet" ? scalar_cast<T>(RetNetOptions{}.gamma) : sigmoid(scalar_cast<T>(s.g(t)));
  return cast_matrix<double>(additive_chunked<T>(q, k, v, gamma, chunk, false, T(0)).O);
}

template <class P> Mat<double> recurrent_by_name(const std::string& name, const Sequence& s) {
  if (name == "linear") return recurrent(LinearAttentionRule<P>(), s);
  if (name == "retnet") return recurrent(RetNetRule<P>(), s);
  return recurrent(Mamba2Rule<P>(), s);
}

double rel(const Mat<double>& a, const Mat<double>& b) { return (a - b).norm() / b.norm(); }

const std::string kRules[] = {"linear", "retnet", "mamba2"};

}  // namespace

TEST_CASE("chunkwise form equals the recurrence in mp50 for every chunk size", "[chunked]") {
  // If this fails, (C1)-(C4) of core/rules/additive_chunked.hpp are not the recurrence: a wrong mask
  // (strict instead of inclusive: the read comes after the write), a decay applied at the wrong step,
  // a lost boundary state, or a last partial chunk mishandled (T = 37 is prime: no chunk size divides it).
  const Sequence s = random_sequence(37, 6, 11);
  for (const auto& name : kRules) {
    const Mat<double> truth = recurrent_by_name<Precision<mp50>>(name, s);
    for (int chunk : {1, 2, 5, 8, 16, 36, 37, 64}) {
      INFO(name << " chunk " << chunk);
      // mp50 carries ~166 bits; the two orders of summation differ by a few hundred roundings of
      // 2^-166 at most. The comparison is in double (what cast_matrix<double> keeps), so the check is
      // that the two agree to double's last bits, and below, in mp50 itself, to 1e-40.
      CHECK(rel(chunked<mp50>(name, s, chunk), truth) <= 1e-15);
    }
  }
  // In mp50 itself (no rounding to double in between): the final state of both forms, linear attention.
  const Mat<mp50> fq = cast_matrix<mp50>(s.q).unaryExpr([](const mp50& x) { return elu_plus_one(x); });
  const Mat<mp50> fk = cast_matrix<mp50>(s.k).unaryExpr([](const mp50& x) { return elu_plus_one(x); });
  const Mat<mp50> v = cast_matrix<mp50>(s.v);
  Mat<mp50> S = Mat<mp50>::Zero(6, 6);
  for (int t = 0; t < 37; ++t) S += v.row(t).transpose() * fk.row(t);
  for (int chunk : {3, 10, 37}) {
    const auto r = additive_chunked<mp50>(fq, fk, v, Vec<mp50>::Ones(37), chunk, true, mp50(1e-4));
    INFO("chunk " << chunk);
    CHECK(to_double(mp50((r.S - S).norm() / S.norm())) <= 1e-40);
  }
}

TEST_CASE("chunkwise form against the mp50 truth in float and bfloat16, beside the recurrence", "[chunked]") {
  // Both forms compute the same sums in another order, so neither may be far from the truth: each is
  // held to the a-priori bound gamma_n = n u / (1 - n u) of a sum of n = T + d rounded terms (each
  // output is a sum over at most T tokens of d-term products), where that bound says something (n u <
  // 1/2; bfloat16 at T = 512 is only measured). If this fails, a form loses accuracy beyond what its
  // arithmetic explains (cancellation in the mask, a decay underflowing where the recurrence keeps it).
  // The measured errors are printed: users need to know which form rounds better, and where.
  for (auto [T, d] : {std::pair{64, 16}, std::pair{512, 16}}) {
    const Sequence s = random_sequence(T, d, 23 + T);
    const double n = T + d;
    auto bound = [&](double u) { return n * u / (1 - n * u); };
    for (const auto& name : kRules) {
      const Mat<double> truth = recurrent_by_name<Precision<mp50>>(name, s);
      const double rec_f = rel(recurrent_by_name<Precision<float>>(name, s), truth);
      const double rec_b = rel(recurrent_by_name<Precision<bfloat16>>(name, s), truth);
      for (int chunk : {16, 64}) {
        const double ch_f = rel(chunked<float>(name, s, chunk), truth);
        const double ch_b = rel(chunked<bfloat16>(name, s, chunk), truth);
        WARN(name << " T=" << T << " d=" << d << " chunk " << chunk << ": rel err vs mp50: float recurrent " << rec_f
                  << " chunked " << ch_f << "; bfloat16 recurrent " << rec_b << " chunked " << ch_b);
        INFO(name << " T=" << T << " chunk " << chunk);
        CHECK(rec_f <= bound(std::ldexp(1.0, -24)));
        CHECK(ch_f <= bound(std::ldexp(1.0, -24)));
        if (n * std::ldexp(1.0, -8) < 0.5) {
          CHECK(rec_b <= bound(std::ldexp(1.0, -8)));
          CHECK(ch_b <= bound(std::ldexp(1.0, -8)));
        }
      }
    }
  }
}

TEST_CASE("chunkwise form refuses a chunk size below 1 and a decayed normalised read", "[chunked]") {
  const Mat<double> x = Mat<double>::Ones(4, 2);
  CHECK_THROWS_WITH(additive_chunked<double>(x, x, x, Vec<double>::Ones(4), 0, false, 0.0), Catch::Contains("chunk"));
  CHECK_THROWS_WITH(additive_chunked<double>(x, x, x, Vec<double>::Constant(4, 0.5), 2, true, 1e-4), Catch::Contains("gamma = 1"));
}
