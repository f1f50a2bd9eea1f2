// FALCON-3 and FALCON-3A (seed 003 sec. 4.4-4.5; core/rules/falcon3/, core/rules/falcon3a/,
// core/rules/sliding_window.hpp), checked like the other rules: the forward against Algorithm 3 and eq.
// (4.20) written out here in mp50 (a literal FIFO in the paper's orientation), the B = 1 reductions to the
// non-sliding rules, exact continuation from the state (S and the window) and its failure from S alone,
// every precision against mp100, the backward (which sends gradient into the earlier tokens of each
// window) against central differences in double and mp50, and the refusals.
#include "mixer_gradcheck.hpp"

#include "../core/precision_case.hpp"
#include "analysis/chunked_exactness.hpp"
#include "core/rules/gpu_support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <deque>
#include <iostream>
#include <string>
#include <utility>

using namespace vla;

namespace {
using P50 = Precision<mp50>;

MixerConfig mixer(const std::string& name, int window = FalconOptions{}.window) {
  MixerConfig mc;
  mc.mixer = name;
  mc.falcon.window = window;
  return mc;
}

NlmsOptions options(int window, double ridge = FalconOptions{}.ridge) {
  NlmsOptions o;
  o.falcon.window = window;
  o.falcon.ridge = ridge;
  return o;
}

// chunk_test_stream's inputs with the gate rows a rule reads (1: falcon3, 2: falcon3a).
analysis::HeadStream stream(int d, int T, std::uint64_t seed, int gate_rows) {
  analysis::HeadStream s = analysis::chunk_test_stream(d, T, seed);
  s.gate = Mat<double>(s.gate.topRows(gate_rows));
  return s;
}

Vec<mp50> column50(const Mat<double>& m, int t) { return cast_vector<mp50>(Vec<double>(m.col(t))); }
mp50 sigmoid50(const mp50& g) { return 1 / (1 + exp(-g)); }

// Seed 003 sec. 4.1's RMSNorm written out: u / (sqrt(u . u / d) + eps_rms).
Vec<mp50> rms_norm_ref(const Vec<mp50>& u, const mp50& eps) {
  return u / mp50(sqrt(mp50(u.dot(u) / mp50(static_cast<int>(u.size())))) + eps);
}

// Algorithm 3 (regression) or eq. (4.16)-(4.20) (inner product) in the paper's own orientation: S (d_x,
// d_v), a FIFO W of (x, v) pairs pushed and popped as line 7 says, U and E accumulated pair by pair as lines
// 9-12, the read o_t = S_t^T RMSNorm(q_t). The pairs are the unshifted (RMSNorm(k_t), v_t), as the rule's.
// Outputs as rows (T, d); `clamped` counts the steps where alpha = min(eta lambda, 1 - eps_gamma) clamped.
Mat<mp50> sliding_reference(const analysis::HeadStream& s, const NlmsOptions& opt, bool regression, int& clamped) {
  const int d = s.d, B = opt.falcon.window;
  const mp50 eps(opt.eps), ridge(opt.falcon.ridge), alpha_max = mp50(1) - mp50(opt.falcon.eps_gamma);
  Mat<mp50> S = Mat<mp50>::Zero(d, d), O(s.T, d);
  std::deque<std::pair<Vec<mp50>, Vec<mp50>>> W;
  clamped = 0;
  for (int t = 0; t < s.T; ++t) {
    W.emplace_back(rms_norm_ref(column50(s.k, t), eps), column50(s.v, t));  // line 7
    if (static_cast<int>(W.size()) > B) W.pop_front();
    const int Bt = static_cast<int>(W.size());  // line 8
    const mp50 beta = 2 / (1 + exp(-mp50(s.gate(0, t))));
    Mat<mp50> U = Mat<mp50>::Zero(d, d), N = Mat<mp50>::Zero(d, d);
    mp50 E = 0;
    for (const auto& [x, v] : W) {  // lines 9-12
      U += x * (v - S.transpose() * x).transpose();
      N += x * v.transpose();
      E += x.dot(x);
    }
    E /= Bt;  // line 13
    if (regression) {
      const mp50 lambda = ridge * E;               // sec. 4.1: lambda_eff = lambda_bar E_bar
      const mp50 eta = beta / (E + lambda + eps);  // line 14
      mp50 alpha = eta * lambda;
      if (alpha > alpha_max) { alpha = alpha_max; ++clamped; }
      S = (1 - alpha) * S + (eta / Bt) * U;  // line 15, with sec. 4.4's clamped gamma
    } else {
      const mp50 rho = beta / (E + eps);                                                    // (4.18)
      const mp50 alpha = (1 - mp50(opt.falcon.eps_gamma)) * sigmoid50(mp50(s.gate(1, t)));  // (4.19)
      S = (1 - alpha) * S + rho * (N / Bt);                                                 // (4.20)
    }
    O.row(t) = (S.transpose() * rms_norm_ref(column50(s.q, t), eps)).transpose();  // line 16
  }
  return O;
}

double rel_diff(const Mat<mp50>& a, const Mat<mp50>& b) { return to_double(mp50((a - b).norm() / b.norm())); }

// The rule stepped over tokens [from, to) of s from `state`: the outputs as rows.
template <class Rule> Mat<mp50> run_from(const Rule& rule, typename Rule::State& state, const analysis::HeadStream& s, int from, int to) {
  Mat<mp50> O(to - from, s.d), out;
  for (int t = from; t < to; ++t) {
    rule.step(state, analysis::token_inputs<mp50>(s, t), out, nullptr);
    O.row(t - from) = out.col(0).transpose();
  }
  return O;
}

// Runs s in one go, and in two segments split at T1: continuing from a fresh state given S and the window
// after T1 (what a stream carries across the boundary), and from one given S alone. Checks the first
// equals the one-go run exactly and the second differs.
template <class Rule> void continuation(const Rule& rule, const analysis::HeadStream& s, int T1, const std::string& name) {
  const int d = s.d, T = s.T, B = rule.options().falcon.window;
  auto whole = rule.init(1, d);
  const Mat<mp50> O = run_from(rule, whole, s, 0, T);
  auto first = rule.init(1, d);
  run_from(rule, first, s, 0, T1);
  auto saved = rule.init(1, d);
  saved.memory.S(0) = first.memory.S(0);
  saved.windows[0] = first.windows[0];
  auto S_only = rule.init(1, d);
  S_only.memory.S(0) = first.memory.S(0);
  const Mat<mp50> rest = run_from(rule, saved, s, T1, T), reset = run_from(rule, S_only, s, T1, T);
  const Mat<mp50> tail = O.bottomRows(T - T1);
  const double exact = rel_diff(rest, tail), from_S = rel_diff(reset, tail);
  INFO(name << ": continued from (S, window) " << exact << ", from S alone " << from_S);
  std::cout << name << " continuation (B = " << B << ", split at " << T1 << " of " << T << "): from (S, window) " << exact
            << ", from S alone " << from_S << "\n";
  CHECK(first.windows[0].size() == B);
  CHECK(exact == 0.0);  // the same operations on the same numbers
  CHECK(rel_diff(saved.memory.S(0), whole.memory.S(0)) == 0.0);
  CHECK(from_S > 1e-3);
}
}  // namespace

TEST_CASE("FALCON-3 forward equals Algorithm 3 written out in mp50, B = 1, 2, 4, clamp idle and acting", "[train][falcon3]") {
  // If this fails, the rule writes another update: the window not the last B pairs (popped too early or
  // late, not restarted per sequence), B_t not the realised size while it fills, a residual read at S_t
  // instead of S_{t-1}, E_bar not the window's mean energy, the ridge not lambda_bar E_bar, the clamp not
  // min(eta lambda, 1 - eps_gamma), or the read before the write. T = 23 is not a multiple of any B.
  const analysis::HeadStream s = stream(5, 23, 7, 1);
  for (const int B : {1, 2, 4}) {
    for (const double ridge : {0.01, 5.0}) {  // 5: eta lambda = beta 5/6 > 1 - eps_gamma for beta > 1.2
      const NlmsOptions opt = options(B, ridge);
      int clamped = 0;
      const double e = rel_diff(analysis::rule_outputs<mp50>(Falcon3Rule<P50>(opt), s), sliding_reference(s, opt, true, clamped));
      INFO("B = " << B << ", ridge " << ridge << ": relative difference " << e << ", clamp acting on " << clamped << " of 23 steps");
      std::cout << "falcon3 vs Algorithm 3: B = " << B << ", ridge " << ridge << ": " << e << " (clamped " << clamped << ")\n";
      CHECK(e <= 1e-40);
      CHECK((ridge > 1 ? clamped > 0 : clamped == 0));
    }
  }
}

TEST_CASE("FALCON-3A forward equals eqs. (4.18)-(4.20) written out in mp50, B = 1, 2, 4", "[train][falcon3]") {
  // If this fails, FALCON-3A reads a residual (it must be additive), its write is not rho_t times the
  // window's mean v x^T, rho_t not beta / (E_bar + eps), its decay not (1 - eps_gamma) sigmoid of the second
  // logit, or the gates' rows are swapped.
  const analysis::HeadStream s = stream(6, 19, 8, 2);
  for (const int B : {1, 2, 4}) {
    const NlmsOptions opt = options(B);
    int clamped = 0;
    const double e = rel_diff(analysis::rule_outputs<mp50>(Falcon3aRule<P50>(opt), s), sliding_reference(s, opt, false, clamped));
    INFO("B = " << B << ": relative difference " << e);
    std::cout << "falcon3a vs eq. 4.20: B = " << B << ": " << e << "\n";
    CHECK(e <= 1e-40);
  }
}

TEST_CASE("FALCON-3 with B = 1 is FALCON-2 with one gain; FALCON-3A with B = 1 is the decoupled non-sliding write", "[train][falcon3]") {
  // Seed 003: "For B = 1 ... Eq. (4.20) reduces to the non-sliding inner-product write with a decoupled
  // decay"; eq. (4.13) at B = 1 is eq. (4.5) with one step size. If this fails, the sliding rules are not
  // the non-sliding ones extended (a different energy, ridge, clamp or eps), or the window leaks a pair.
  const int d = 5, T = 21;
  const analysis::HeadStream s1 = stream(d, T, 9, 1);
  analysis::HeadStream sd = s1;
  sd.gate = s1.gate.replicate(d, 1);  // FALCON-2 reads d_h logits: all equal to FALCON-3's one
  for (const double ridge : {0.01, 5.0}) {
    const NlmsOptions opt = options(1, ridge);
    const Falcon3Rule<P50> f3(opt);
    const Falcon2Rule<P50> f2(opt);
    auto st3 = f3.init(1, d);
    auto st2 = f2.init(1, d);
    double worst_S = 0, worst_o = 0;
    Mat<mp50> o3, o2;
    for (int t = 0; t < T; ++t) {
      f3.step(st3, analysis::token_inputs<mp50>(s1, t), o3, nullptr);
      f2.step(st2, analysis::token_inputs<mp50>(sd, t), o2, nullptr);
      worst_S = std::max(worst_S, rel_diff(st3.memory.S(0), st2.memory.S(0)));
      worst_o = std::max(worst_o, rel_diff(o3, o2));
    }
    INFO("ridge " << ridge << ": state " << worst_S << ", outputs " << worst_o);
    std::cout << "falcon3 (B = 1) vs falcon2: ridge " << ridge << ": state " << worst_S << ", outputs " << worst_o << "\n";
    CHECK(worst_S <= 1e-45);
    CHECK(worst_o <= 1e-45);
  }

  // FALCON-3A, B = 1: S_t = gamma_t S_{t-1} + rho_t v_t x_t^T, written out (our orientation).
  const analysis::HeadStream s2 = stream(d, T, 10, 2);
  const NlmsOptions opt = options(1);
  const mp50 eps(opt.eps);
  Mat<mp50> S = Mat<mp50>::Zero(d, d), O(T, d);
  for (int t = 0; t < T; ++t) {
    const Vec<mp50> x = rms_norm_ref(column50(s2.k, t), eps);
    const mp50 rho = 2 * sigmoid50(mp50(s2.gate(0, t))) / (x.dot(x) + eps);
    const mp50 gamma = 1 - (1 - mp50(opt.falcon.eps_gamma)) * sigmoid50(mp50(s2.gate(1, t)));
    S = gamma * S + rho * column50(s2.v, t) * x.transpose();
    O.row(t) = (S * rms_norm_ref(column50(s2.q, t), eps)).transpose();
  }
  const double e3a = rel_diff(analysis::rule_outputs<mp50>(Falcon3aRule<P50>(opt), s2), O);
  // And FALCON-2A with ridge 0 (gamma = 1, eta = beta / (||x||^2 + eps) = rho) is FALCON-3A at B = 1 with
  // no decay: a decay logit of -1000 makes alpha ~ e^-1000, far below mp50's resolution.
  analysis::HeadStream s0 = s2;
  s0.gate.row(1).setConstant(-1000.0);
  const double e2a = rel_diff(analysis::rule_outputs<mp50>(Falcon3aRule<P50>(opt), s0),
                              analysis::rule_outputs<mp50>(Falcon2aRule<P50>(options(1, 0.0)), stream(d, T, 10, 1)));
  INFO("falcon3a (B = 1) vs the decoupled write " << e3a << ", vs falcon2a (ridge 0, no decay) " << e2a);
  std::cout << "falcon3a (B = 1) vs the decoupled write " << e3a << ", vs falcon2a (ridge 0, alpha -> 0) " << e2a << "\n";
  CHECK(e3a <= 1e-45);
  CHECK(e2a <= 1e-45);
}

TEST_CASE("FALCON-3 and FALCON-3A continue exactly from S and the window, and not from S alone", "[train][falcon3]") {
  // Seed 003 sec. 4.4, "Exact streaming state": the state after step t is S_t and the window. Running T
  // tokens in one go must equal running T1, saving (S, window) into a fresh state and running the rest;
  // if not, the state misses something the next step reads. From S alone (an empty window, a boundary
  // reset) the run must differ: if it did not, the window would not be part of the recurrence.
  const int d = 5, T = 23, T1 = 10;
  continuation(Falcon3Rule<P50>(options(4)), stream(d, T, 11, 1), T1, "falcon3");
  continuation(Falcon3aRule<P50>(options(4)), stream(d, T, 11, 2), T1, "falcon3a");
}

TEST_CASE("FALCON-3 and FALCON-3A in every precision against mp100", "[train][falcon3][precision]") {
  // The precision tests' shared case (tests/core/precision_case.hpp: T = 16 > B) and their tolerance.
  for (const std::string m : {"falcon3", "falcon3a"}) test::check_mixer_against_mp100(m);
}

TEST_CASE("FALCON-3 and FALCON-3A: layer gradcheck (double) and mixer gradcheck (mp50)", "[train][falcon3]") {
  // dX and every weight of one mixer layer against central differences, bound 10x the finite difference's
  // own error (T = 6 in double, 5 in mp50: B = 4 slides, B = 2 slides more). Step t reads the pairs of
  // tokens t-B_t+1..t, so a token's dk, dv gather from up to B steps: a missing share (a later step's
  // residual or energy term not sent back to the earlier token), a token finished before all its steps
  // ran, the window's energy not reaching every x_j (through lambda, eta, rho), or the clamp's cut
  // misplaced shows here. A larger ridge (0.5) weighs the decay's path.
  MixerConfig wide = mixer("falcon3", 2);
  wide.falcon.ridge = 0.5;
  for (const MixerConfig& mc : {mixer("falcon3"), wide, mixer("falcon3a"), mixer("falcon3a", 2)}) {
    INFO(mc.mixer << " window " << mc.falcon.window << " ridge " << mc.falcon.ridge);
    test::check_mixer_gradients(mc);
  }
}

TEST_CASE("FALCON-3 and FALCON-3A refuse what they cannot do, naming the parameter", "[train][falcon3]") {
  // No CUDA kernel, no S renormalisation, a window outside [1, 1024], gate rows other than the rule's:
  // each an error that names the flag or the field, not a run of something else.
  for (const std::string m : {"falcon3", "falcon3a"}) {
    CHECK_THROWS_WITH(gpu_kernel_for(mixer(m), 32, GpuUse::Training), Catch::Contains("--mixer") && Catch::Contains(m));
    MixerConfig mc = mixer(m);
    mc.renormalise_S = true;
    mc.renorm_threshold = 10;
    CHECK_THROWS_WITH(with_rule<Precision<double>>(mc, [](const auto&) { return 0; }), Catch::Contains("--renormalise"));
    for (const int B : {0, -3, 1025})
      CHECK_THROWS_WITH(with_rule<Precision<double>>(mixer(m, B), [](const auto&) { return 0; }),
                        Catch::Contains("window") && Catch::Contains("[1, 1024]"));
  }
  HeadInputs<double> in;
  in.q = in.k = in.v = Mat<double>::Ones(4, 1);
  Mat<double> out;
  in.gate = Mat<double>::Zero(2, 1);
  const Falcon3Rule<Precision<double>> f3{NlmsOptions{}};
  auto st3 = f3.init(1, 4);
  CHECK_THROWS_WITH(f3.step(st3, in, out, nullptr), Catch::Contains("gate") && Catch::Contains("1 gate logit"));
  in.gate = Mat<double>::Zero(1, 1);
  const Falcon3aRule<Precision<double>> f3a{NlmsOptions{}};
  auto st3a = f3a.init(1, 4);
  CHECK_THROWS_WITH(f3a.step(st3a, in, out, nullptr), Catch::Contains("gate") && Catch::Contains("2 gate logits"));
}
