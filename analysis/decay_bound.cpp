#include "analysis/decay_bound.hpp"

#include "analysis/head_stream.hpp"
#include "core/feature_map.hpp"
#include "core/rules/linear/rule.hpp"
#include "core/rules/mamba2/rule.hpp"
#include "core/rules/retnet/rule.hpp"

#include <algorithm>
#include <stdexcept>

namespace vla::analysis {

namespace {
using P = Precision<double>;

// gamma_t and the key the rule writes, as the rule computes them.
template <class Rule> DecayBound measure(const Rule& rule, const std::string& name, const HeadStream& s) {
  DecayBound r{name};
  double B = 0, mid = 0, late = 0;  // sums of ||S_t||_F over t in (0.4 T, 0.5 T] and (0.9 T, T]
  drive(rule, s, [&](int t, const auto& st, const auto&, const auto&) {
    const Vec<double> k = s.k.col(t - 1), v = s.v.col(t - 1);
    double gamma = 1.0, kn = k.norm();
    if (name == "retnet") gamma = RetNetOptions{}.gamma;
    if (name == "mamba2") gamma = sigmoid(s.gate(0, t - 1));
    if (name == "linear") kn = elu_plus_one(k).norm();  // linear attention writes v phi(k)^T
    B = gamma * B + kn * v.norm();
    const double S = st.memory.S(0).norm();
    r.max_excess = std::max(r.max_excess, (S - B) / B);
    r.max_S = std::max(r.max_S, S);
    if (10 * t > 4 * s.T && 10 * t <= 5 * s.T) mid += S;
    if (10 * t > 9 * s.T) late += S;
    if (t == s.T) r.S_T = S;
  });
  r.growth = late / mid;  // equal window lengths: a ratio of mean norms
  return r;
}
}  // namespace

DecayBound decay_bound(const std::string& rule, int d_head, int T, std::uint64_t seed) {
  const HeadStream s = random_head_stream(d_head, T, seed);
  if (rule == "retnet") return measure(RetNetRule<P>(), rule, s);
  if (rule == "mamba2") return measure(Mamba2Rule<P>(), rule, s);
  if (rule == "linear") return measure(LinearAttentionRule<P>(), rule, s);
  throw std::invalid_argument("rule: decay_bound measures retnet, mamba2, linear; got '" + rule + "'");
}

}  // namespace vla::analysis
