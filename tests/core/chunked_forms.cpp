// The chunkwise-parallel forms (core/rules/additive_chunked.hpp: linear attention, RetNet, Mamba-2;
// core/rules/delta_chunked.hpp: DeltaNet, and the delta rule's other members written out here;
// core/rules/vla/chunked.hpp: Algorithm 1, whose own tests are tests/core/vla_chunked.cpp) against
// the recurrences they claim to equal. In mp50 the two agree to the working precision for every chunk
// size (T = 37 is prime: no size divides it); in float and bfloat16 both are measured against mp50.
#include "analysis/chunked_exactness.hpp"
#include "core/rules/additive_chunked.hpp"
#include "core/rules/delta_chunked.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <string>

using namespace vla;
using namespace vla::analysis;

namespace {
double rel(const Mat<double>& a, const Mat<double>& b) { return (a - b).norm() / b.norm(); }
}  // namespace

TEST_CASE("chunkwise forms equal the recurrence in mp50 for every chunk size", "[chunked]") {
  // If this fails, a chunked form is not its rule: a wrong mask (strict instead of inclusive: the read
  // comes after the write), a decay applied at the wrong step, a lost boundary state, a wrong
  // triangular system for the delta rule's pseudo-values (D1), or a last partial chunk mishandled.
  // mp50 carries ~166 bits; the two orders of summation differ by a few thousand roundings of ~1e-50.
  const HeadStream s = chunk_test_stream(6, 37, 11);
  for (const auto& rule : kChunkedRules) {
    const auto e = chunked_exactness_mp50(rule, s, {1, 2, 5, 8, 16, 36, 37, 64});
    INFO(rule << ": worst chunk " << e.worst_chunk << ", rel diff " << e.max_rel_diff);
    CHECK(e.max_rel_diff <= 1e-40);
  }
}

TEST_CASE("the delta rule's chunked form covers the classic delta rule and Gated DeltaNet", "[chunked]") {
  // The same UT form with the other coefficients of S_t = a_t S_{t-1} + b_t (v_t - c_t S_{t-1} k_t) k_t^T:
  // the classic delta rule (a = c = 1, b = beta in (0, 2)) and Gated DeltaNet (a = c = alpha, b = beta),
  // against that recurrence written out step by step here, in mp50, raw keys normalised, o = S_t q_t.
  // If this fails, (D1) holds only for DeltaNet's coefficients (b = c = 1), not for the family.
  const int T = 29, d = 5;
  const HeadStream s = chunk_test_stream(d, T, 5);
  const Mat<mp50> Q = cast_matrix<mp50>(Mat<double>(s.q.transpose())), V = cast_matrix<mp50>(Mat<double>(s.v.transpose()));
  Mat<mp50> K = cast_matrix<mp50>(Mat<double>(s.k.transpose()));
  for (int t = 0; t < T; ++t) K.row(t) /= mp50(K.row(t).norm());
  Vec<mp50> sig(T);
  for (int t = 0; t < T; ++t) sig(t) = sigmoid(mp50(s.gate(0, t)));
  const Vec<mp50> ones = Vec<mp50>::Ones(T);
  const Vec<mp50> beta2 = mp50(2) * Vec<mp50>(Vec<mp50>::Ones(T) - sig);  // in (0, 2), some above 1
  for (const auto& [name, w] : {std::pair{"classic delta", DeltaCoefficients<mp50>{ones, beta2, ones}},
                                std::pair{"gated deltanet", DeltaCoefficients<mp50>{sig, beta2, sig}}}) {
    Mat<mp50> S = Mat<mp50>::Zero(d, d), O(T, d);
    for (int t = 0; t < T; ++t) {
      const Vec<mp50> k = K.row(t).transpose(), v = V.row(t).transpose(), q = Q.row(t).transpose();
      const Vec<mp50> u = w.b(t) * Vec<mp50>(v - w.c(t) * (S * k));
      S = w.a(t) * S + u * k.transpose();
      O.row(t) = (S * q).transpose();
    }
    for (int chunk : {1, 4, 7, 29, 32}) {
      const auto r = delta_chunked<mp50>(Q, K, K, V, w, chunk, false, mp50(0));
      INFO(name << " chunk " << chunk);
      CHECK(to_double(mp50((r.O - O).norm() / O.norm())) <= 1e-40);
      CHECK(to_double(mp50((r.S - S).norm() / S.norm())) <= 1e-40);
    }
  }
}

TEST_CASE("chunkwise forms against the mp50 truth in float and bfloat16, beside the recurrence", "[chunked]") {
  // Both forms compute the same sums in another order (the delta rule also solves (D1), VLA also (V1)
  // with its normalisations and divisions by delta >= 1, none of which amplifies a relative error by
  // more than a few roundings), so neither may be far from the truth: each is held to the a-priori bound gamma_n = n u / (1 - n u) of a sum of
  // n = T + d rounded terms, where that bound says something (n u < 1/2; bfloat16 at T = 512 is only
  // measured). If this fails, a form loses accuracy beyond what its arithmetic explains (cancellation
  // in the mask, a decay underflowing where the recurrence keeps it, an ill-conditioned (I + L)). The
  // errors are printed: users need to know which form rounds better, and where.
  for (auto [T, d] : {std::pair{64, 16}, std::pair{512, 16}}) {
    const HeadStream s = chunk_test_stream(d, T, 23 + T);
    const double n = T + d;
    auto bound = [&](double u) { return n * u / (1 - n * u); };
    for (const auto& rule : kChunkedRules) {
      const Mat<double> truth = cast_matrix<double>(recurrent_outputs<mp50>(rule, s));
      const double rec_f = rel(cast_matrix<double>(recurrent_outputs<float>(rule, s)), truth);
      const double rec_b = rel(cast_matrix<double>(recurrent_outputs<bfloat16>(rule, s)), truth);
      for (int chunk : {16, 64}) {
        const double ch_f = rel(cast_matrix<double>(chunked_outputs<float>(rule, s, chunk)), truth);
        const double ch_b = rel(cast_matrix<double>(chunked_outputs<bfloat16>(rule, s, chunk)), truth);
        WARN(rule << " T=" << T << " d=" << d << " chunk " << chunk << ": rel err vs mp50: float recurrent " << rec_f
                  << " chunked " << ch_f << "; bfloat16 recurrent " << rec_b << " chunked " << ch_b);
        INFO(rule << " T=" << T << " chunk " << chunk);
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

TEST_CASE("chunkwise forms refuse a chunk size below 1 and inputs that disagree", "[chunked]") {
  const Mat<double> x = Mat<double>::Ones(4, 2);
  const Vec<double> one = Vec<double>::Ones(4);
  CHECK_THROWS_WITH(additive_chunked<double>(x, x, x, one, 0, false, 0.0), Catch::Contains("chunk"));
  CHECK_THROWS_WITH(additive_chunked<double>(x, x, x, Vec<double>::Constant(4, 0.5), 2, true, 1e-4), Catch::Contains("gamma = 1"));
  CHECK_THROWS_WITH(delta_chunked<double>(x, x, x, x, {one, one, one}, 0, false, 0.0), Catch::Contains("chunk"));
  CHECK_THROWS_WITH(delta_chunked<double>(x, x, x, x, {one, Vec<double>::Ones(3), one}, 2, false, 0.0), Catch::Contains("shape"));
  CHECK_THROWS_WITH(chunked_outputs<double>("softmax", chunk_test_stream(2, 3, 1), 2), Catch::Contains("rule"));
}
