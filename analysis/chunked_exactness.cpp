#include "analysis/chunked_exactness.hpp"

#include "core/feature_map.hpp"
#include "core/rules/additive_chunked.hpp"
#include "core/rules/linear/rule.hpp"
#include "core/rules/mamba2/rule.hpp"
#include "core/rules/retnet/rule.hpp"

#include <random>
#include <stdexcept>

namespace vla::analysis {

namespace {

using P = Precision<mp50>;

struct Inputs {
  Mat<mp50> q, k, v;  // (T, d), tokens as rows
  Vec<mp50> g;        // (T) gate logits (Mamba-2's decay)
};

// The rule stepped over the inputs, batch 1: the outputs as rows.
template <class Rule> Mat<mp50> recurrent(const Rule& rule, const Inputs& x) {
  const Eigen::Index T = x.q.rows(), d = x.q.cols();
  auto st = rule.init(1, int(d));
  HeadInputs<mp50> in;
  Mat<mp50> out, O(T, d);
  for (Eigen::Index t = 0; t < T; ++t) {
    in.q = x.q.row(t).transpose();
    in.k = x.k.row(t).transpose();
    in.v = x.v.row(t).transpose();
    in.gate = Vec<mp50>::Constant(1, x.g(t));
    rule.step(st, in, out, nullptr);
    O.row(t) = out.transpose();
  }
  return O;
}

}  // namespace

ChunkedExactness chunked_exactness_mp50(const std::string& rule, int T, int d, const std::vector<int>& chunks, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> n(0.0, 1.0);
  Inputs x{Mat<mp50>(T, d), Mat<mp50>(T, d), Mat<mp50>(T, d), Vec<mp50>(T)};
  for (auto* m : {&x.q, &x.k, &x.v})
    for (auto& e : m->reshaped()) e = n(gen);
  for (auto& e : x.g) e = 2.0 + n(gen);

  Mat<mp50> truth, fq = x.q, fk = x.k;
  Vec<mp50> gamma = Vec<mp50>::Ones(T);
  bool normalised = false;
  if (rule == "linear") {
    truth = recurrent(LinearAttentionRule<P>(), x);
    fq = x.q.unaryExpr([](const mp50& a) { return elu_plus_one(a); });  // phi (eq. 3)
    fk = x.k.unaryExpr([](const mp50& a) { return elu_plus_one(a); });
    normalised = true;
  } else if (rule == "retnet") {
    truth = recurrent(RetNetRule<P>(), x);
    gamma.setConstant(mp50(RetNetOptions{}.gamma));
  } else if (rule == "mamba2") {
    truth = recurrent(Mamba2Rule<P>(), x);
    for (int t = 0; t < T; ++t) gamma(t) = sigmoid(x.g(t));
  } else {
    throw std::invalid_argument("rule: the chunkwise form covers linear, retnet, mamba2; got '" + rule + "'");
  }
  ChunkedExactness r{rule, 0.0, 0};
  for (int c : chunks) {
    const auto ch = additive_chunked<mp50>(fq, fk, x.v, gamma, c, normalised, mp50(FastWeightOptions{}.eps));
    const double diff = to_double(mp50((ch.O - truth).norm() / truth.norm()));
    if (diff >= r.max_rel_diff) r = {rule, diff, c};
  }
  return r;
}

}  // namespace vla::analysis
