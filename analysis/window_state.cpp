#include "analysis/window_state.hpp"

#include "analysis/chunked_exactness.hpp"
#include "core/rules/falcon3/rule.hpp"
#include "core/rules/falcon3a/rule.hpp"

#include <fmt/format.h>

#include <limits>
#include <stdexcept>

namespace vla::analysis {

namespace {

using P50 = Precision<mp50>;

// The rule stepped over tokens [from, to) of s from `state`: the outputs as rows.
template <class Rule> Mat<mp50> run_from(const Rule& rule, typename Rule::State& state, const HeadStream& s, int from, int to) {
  Mat<mp50> O(to - from, s.d), out;
  for (int t = from; t < to; ++t) {
    rule.step(state, rule_inputs<Rule>(s, t), out, nullptr);
    O.row(t - from) = out.col(0).transpose();
  }
  return O;
}

template <class Rule> WindowContinuation measure(const Rule& rule, const std::string& name, int B, const HeadStream& s, int T1) {
  const int d = s.d, T = s.T;
  auto whole = rule.init(1, d);
  const Mat<mp50> O = run_from(rule, whole, s, 0, T);
  const Mat<mp50> tail = O.bottomRows(T - T1);
  auto first = rule.init(1, d);
  run_from(rule, first, s, 0, T1);
  // Continue from S_{T1} and the newest p pairs of the window.
  auto continued = [&](int p) {
    auto st = rule.init(1, d);
    st.memory.S(0) = first.memory.S(0);
    auto& pairs = st.windows[0].pairs;
    const auto& all = first.windows[0].pairs;
    pairs.assign(all.end() - std::min<std::ptrdiff_t>(p, std::ptrdiff_t(all.size())), all.end());
    const Mat<mp50> rest = run_from(rule, st, s, T1, T);
    return to_double(mp50((rest - tail).norm() / tail.norm()));
  };
  WindowContinuation w{name, B, continued(B - 1), std::numeric_limits<double>::quiet_NaN(), continued(0)};
  if (B >= 2) w.one_pair_short = continued(B - 2);
  return w;
}

}  // namespace

WindowContinuation window_continuation(const std::string& rule, int B, int d, int T, int T1, std::uint64_t seed) {
  if (!(B >= 1 && B <= T1 && T1 < T))
    throw std::invalid_argument(fmt::format("window_continuation: need 1 <= B <= T1 < T, got B = {}, T1 = {}, T = {}", B, T1, T));
  const HeadStream s = chunk_test_stream(d, T, seed);
  NlmsOptions opt;
  opt.falcon.window = B;
  if (rule == "falcon3") return measure(Falcon3Rule<P50>(opt), rule, B, s, T1);
  if (rule == "falcon3a") return measure(Falcon3aRule<P50>(opt), rule, B, s, T1);
  throw std::invalid_argument(fmt::format("rule: the sliding-window rules are falcon3 and falcon3a, got '{}'", rule));
}

}  // namespace vla::analysis
