// The claims of the VLA paper (000) and the core spec (001), each with its tolerance and the
// measurement that decides it. Tolerances are written next to the claim, with the reason; the
// verdict is a comparison of the measured numbers against them, nothing else.
#include "analysis/chunked_exactness.hpp"
#include "analysis/claims_context.hpp"
#include "analysis/decay_bound.hpp"
#include "analysis/mva_decomposition.hpp"
#include "analysis/nlms_step.hpp"
#include "analysis/window_state.hpp"
#include "analysis/reduction.hpp"
#include "analysis/unit_jacobian_search.hpp"
#include "analysis/write_direction.hpp"
#include "core/io/csv.hpp"
#include "core/rules/nlms_memory.hpp"
#include "core/scalar.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace vla::analysis {

// ---- the analyses at the ledger's settings ----

NormConfig ClaimsContext::norm_config() const {
  NormConfig c;  // Fig. 4: d_h = 32, T = 1000, seeds 42, 123, 999, double (same protocol as `vla stability`)
  c.mixers = {"linear", "deltanet", "vla"};
  if (!cfg.quick) c.T = 100000;  // full mode: T = 10^5 in double, long enough to see the plateau
  return c;
}

JacobianConfig ClaimsContext::jacobian_config() const {
  JacobianConfig c;  // d_h in {32, 64, 96, 128}, VLAv2 and VLAv3, Table 2's T = 25
  c.T = cfg.quick ? 100 : 1000;
  c.check_steps = 25;
  return c;
}

RecoveryConfig ClaimsContext::recovery_config() const {
  RecoveryConfig c;
  c.ns = cfg.quick ? std::vector<int>{4, 8, 16, 24, 32, 40, 48, 64} : std::vector<int>{2, 4, 8, 12, 16, 20, 24, 28, 32, 40, 48, 64, 96};
  return c;
}

AtlasConfig ClaimsContext::atlas_config() const {
  AtlasConfig c;  // the paper's d_h = 32 and Fig. 4's T = 1000 in both modes (~20 s on 2 cores)
  c.d_head = 32;
  c.T = 1000;
  if (cfg.quick) c.policies = {"clamp", "skip", "renorm"};  // no-refresh only in the full ledger
  return c;
}

const NormResult& ClaimsContext::norms() {
  if (!norms_) {
    norms_ = run_norms(norm_config());
    write_norms(*norms_, dir);
  }
  return *norms_;
}
const std::vector<JacobianSeries>& ClaimsContext::jacobian() {
  if (!jacobian_) {
    jacobian_ = run_jacobian(jacobian_config());
    write_jacobian(jacobian_config(), *jacobian_, dir);
  }
  return *jacobian_;
}
const std::vector<RecoveryPoint>& ClaimsContext::recovery() {
  if (!recovery_) {
    const auto c = recovery_config();
    RecoveryConfig dbl = c;  // the overload sweep in double; mp50 up to n = d_h
    dbl.precisions = {"double"};
    recovery_ = run_recovery(dbl);
    RecoveryConfig mp = c;
    mp.precisions = {"mp50"};
    mp.ns.clear();
    for (int n : c.ns)
      if (n <= c.d_head) mp.ns.push_back(n);
    if (cfg.quick) mp.ns = {8, c.d_head};
    const auto more = run_recovery(mp);
    recovery_->insert(recovery_->end(), more.begin(), more.end());
    RecoveryConfig both = c;
    both.ns = c.ns;
    write_recovery(both, *recovery_, dir);
  }
  return *recovery_;
}
const std::vector<AtlasCell>& ClaimsContext::atlas() {
  if (!atlas_) {
    atlas_ = run_atlas(atlas_config());
    write_atlas(atlas_config(), *atlas_, dir);
  }
  return *atlas_;
}

namespace {

constexpr double kU = 0x1p-53;  // double's unit roundoff

Verdict from_counts(int held, int total) {
  if (held == total) return Verdict::Holds;
  if (held == 0) return Verdict::Fails;
  return Verdict::Partial;
}

// ---- Proposition 1 ----
void prop1(ClaimsContext& ctx, ClaimResult& r) {
  const auto& n = ctx.norms();
  const auto& c = n.config;
  const double excess = n.max_excess("vla");
  const double plateau = n.mean_at("vla", c.T, 'S') / n.mean_at("vla", c.T / 2, 'S');
  // Eq. 13 is a triangle inequality: only rounding can break it; a sum of T terms in double carries a
  // relative error of at most ~T u, so 16 T u is a safe margin that no real violation would stay under.
  const double tol = 16.0 * c.T * kU;
  const bool bound_ok = excess <= tol;
  const bool plateau_ok = plateau <= 1.05;
  r.measured = fmt::format(
      "VLA (Alg. 1), d_h = {}, T = {}, seeds {}, double, Sec. 6.2 random inputs: max_t (||S_t||_F - bound_t)/bound_t = {:.3g}; "
      "||S_T||/||S_T/2|| = {:.4f} (||S_T||_F = {:.4g}). For reference DeltaNet excess {:.3g}, linear attention excess {:.3g} "
      "(its write v phi(k)^T is not unit: eq. 13 is not its bound)",
      c.d_head, c.T, fmt::join(c.seeds, ","), excess, plateau, n.mean_at("vla", c.T, 'S'), n.max_excess("deltanet"),
      n.max_excess("linear"));
  r.verdict = bound_ok ? (plateau_ok ? Verdict::Holds : Verdict::Partial) : Verdict::Fails;
  if (!plateau_ok) r.counterexample = fmt::format("no plateau: ||S_t||_F still grows by {:.1f}% over the second half", 100 * (plateau - 1));
  if (!bound_ok) r.counterexample = fmt::format("eq. 13 exceeded by a relative {:.3g}", excess);
  r.artifacts = {ctx.rel("state_norms.png"), ctx.rel("state_norms.csv")};
}

// ---- Proposition 2 ----
void prop2(ClaimsContext& ctx, ClaimResult& r) {
  const auto any = search_unit_jacobian(4, false);
  const auto pos = search_unit_jacobian(4, true);
  double traj_max = 0, disagreement = 0;
  for (const auto& s : ctx.jacobian())
    if (s.mixer == "vla") { traj_max = std::max(traj_max, s.max_norm()); disagreement = std::max(disagreement, s.max_rel_disagreement); }
  const double tol = 16 * kU;  // a norm of exactly 1 computed in double: a few u
  const bool traj_ok = traj_max <= 1 + tol;
  r.measured = fmt::format(
      "mp50 search over +-e_i, (+-e_i +- e_j)/sqrt2 for d <= 4: {}. Along VLAv3 trajectories (d_h 32..128, double): "
      "max_t ||J_t||_2 = {:.6f} (closed form, power iteration and JacobiSVD agree to {:.1e}). Closed form for unit vectors "
      "with k.alpha = p: sqrt(1 + (1 - 2p + sqrt(5 - 4p))/2) > 1 for every p < 1 (p = 0: {:.6f}, the golden ratio)",
      any.found ? "violations found" : "no violation", traj_max, disagreement, unit_pair_norm(0.0));
  r.verdict = (any.found || pos.found || !traj_ok) ? Verdict::Fails : Verdict::Holds;
  if (any.found)
    r.counterexample = fmt::format("smallest over all unit pairs: {}; smallest with k.alpha > 0 (what VLA produces): {}",
                                   any.describe(), pos.describe());
  r.artifacts = {ctx.rel("jacobian_steps.png"), ctx.rel("jacobian_steps.csv")};
}

// ---- Corollaries 1/2 ----
void corollary(ClaimsContext& ctx, ClaimResult& r) {
  const auto cfg = ctx.jacobian_config();
  double prod_max = 0, lyap_max = -1e300;
  int worst_d = 0;
  for (const auto& s : ctx.jacobian())
    if (s.mixer == "vla") {
      const double p = *std::max_element(s.product.begin(), s.product.end());
      if (p > prod_max) { prod_max = p; worst_d = s.d; }
      lyap_max = std::max(lyap_max, s.lyapunov);
    }
  const double tol = 16 * kU * cfg.product_T;  // T products of norm-1 maps: rounding grows ~linearly in T
  const bool prod_ok = prod_max <= 1 + tol;
  const bool rate_ok = lyap_max <= 0.01;       // "no explosion": growth below 1% per step
  r.measured = fmt::format(
      "VLAv3, d_h in {{{}}}, double, Sec. 6.2 random inputs: max over d_h and t <= {} of ||J_1...J_t||_2 = {:.6g} (d_h = {}); "
      "largest Lyapunov exponent over T = {} steps (repeated QR) <= {:.4g} per step",
      fmt::join(cfg.d_heads, ", "), cfg.product_T, prod_max, worst_d, cfg.T, lyap_max);
  r.verdict = prod_ok ? Verdict::Holds : (rate_ok ? Verdict::Partial : Verdict::Fails);
  if (!prod_ok)
    r.counterexample = fmt::format("d_h = {}: ||J_1...J_t||_2 reaches {:.6g} > 1 within t <= {} (seed {})", worst_d, prod_max,
                                   cfg.product_T, cfg.seed);
  r.artifacts = {ctx.rel("jacobian_product.png"), ctx.rel("jacobian_product.csv")};
}

// ---- Proposition 3 ----
void prop3(ClaimsContext& ctx, ClaimResult& r) {
  const auto cfg = ctx.recovery_config();
  // Exact arithmetic is what Prop. 3 speaks of: measured in mp50, where rounding leaves ~1e-48; the
  // 1e-30 tolerance leaves 18 decades for conditioning (correlated keys) while any algebraic defect
  // of the update shows as O(1e-3) or more.
  const double tol = 1e-30;
  std::map<std::string, double> worst;            // keys -> worst error of VLA at n <= d_h, mp50
  std::map<std::string, std::pair<int, double>> first_fail;  // keys -> smallest failing n
  std::string others;
  for (const auto& p : ctx.recovery()) {
    if (p.precision != "mp50" || p.n > p.d) continue;
    if (p.mixer == "vla") {
      worst[p.keys] = std::max(worst[p.keys], p.max_rel_error);
      if (p.max_rel_error > tol && (!first_fail.count(p.keys) || p.n < first_fail[p.keys].first))
        first_fail[p.keys] = {p.n, p.max_rel_error};
    }
  }
  int held = 0;
  std::string m = fmt::format("VLA (Alg. 1, lambda0 = {}), d_h = {}, mp50, max_i ||S_n k_hat_i - v_i||/||v_i|| over n <= d_h: ",
                              cfg.base.penalty.lambda0, cfg.d_head);
  for (const auto& [k, e] : worst) {
    m += fmt::format("{} keys {:.3g}; ", k, e);
    held += e <= tol ? 1 : 0;
  }
  // Other rules at n = d_h, orthonormal keys, mp50.
  m += "at n = d_h, orthonormal keys, mp50:";
  for (const auto& p : ctx.recovery())
    if (p.precision == "mp50" && p.n == p.d && p.keys == "orthonormal") m += fmt::format(" {} {:.2g};", p.mixer, p.max_rel_error);
  r.measured = m;
  const bool ortho_ok = worst.count("orthonormal") && worst["orthonormal"] <= tol;
  r.verdict = held == int(worst.size()) ? Verdict::Holds : (ortho_ok ? Verdict::Partial : Verdict::Fails);
  std::string ce;
  for (const auto& [k, f] : first_fail) ce += fmt::format("{} keys: n = {}, d_h = {}, error {:.3g}; ", k, f.first, cfg.d_head, f.second);
  r.counterexample = ce;
  r.artifacts = {ctx.rel("recovery_random_double.png"), ctx.rel("recovery_orthonormal_double.png"),
                 ctx.rel("recovery_correlated_double.png"), ctx.rel("recovery_orthonormal_mp50.csv")};
}

// ---- Table 2 ----
void table2(ClaimsContext& ctx, ClaimResult& r) {
  struct Row { int d; double j2, prod; };
  const std::vector<Row> paper{{32, 5.36, 1.7e18}, {64, 13.50, 1.8e28}, {96, 20.48, 6.1e32}, {128, 26.47, 3.7e35}};
  // Per-step norm: within a factor 2 (the paper does not state its input distribution, so a
  // protocol difference of tens of percent is expected; a factor 2 is not). Product after T = 25:
  // within 2 decades (it is a 25th power: a factor 1.2 in ||J|| is already a factor 100).
  // VLAv3 column: 1.000 as printed, i.e. within 5e-4.
  int held = 0, total = 0;
  std::string m = "mean_{t<=25} ||J_t||_2 and ||J_25...J_1||_2, Sec. 6.2 random inputs, seed 42, double. VLAv2:";
  std::string ce;
  for (const auto& row : paper)
    for (const auto& s : ctx.jacobian()) {
      if (s.d != row.d) continue;
      double mean25 = 0;
      for (int t = 0; t < 25; ++t) mean25 += s.closed[t] / 25;
      const double prod = s.product.back();
      if (s.mixer == "vla-v2") {
        const bool a = mean25 <= 2 * row.j2 && mean25 >= row.j2 / 2;
        const bool b = std::abs(std::log10(prod / row.prod)) <= 2;
        held += a + b;
        total += 2;
        m += fmt::format(" d{} {:.4g} / {:.3g};", row.d, mean25, prod);
        if (!a || !b)
          ce += fmt::format("VLAv2 d_h = {}: ||J|| {:.4g} vs {}, product {:.3g} vs {:.2g}; ", row.d, mean25, row.j2, prod, row.prod);
      } else if (s.mixer == "vla") {
        const bool a = std::abs(mean25 - 1) <= 5e-4, b = std::abs(prod - 1) <= 5e-4;
        held += a + b;
        total += 2;
        m += fmt::format(" [v3 d{} {:.6f} / {:.6f}]", row.d, mean25, prod);
        if (!a || !b) ce += fmt::format("VLAv3 d_h = {}: ||J|| {:.6f}, product {:.6f} vs 1.000; ", row.d, mean25, prod);
      }
    }
  r.measured = m + fmt::format(" ({} of {} cells within tolerance)", held, total);
  r.verdict = from_counts(held, total);
  r.counterexample = ce;
  r.artifacts = {ctx.rel("jacobian_summary.csv"), ctx.rel("jacobian_product.png")};
}

// ---- Fig. 4 ----
void fig4_S(ClaimsContext& ctx, ClaimResult& r) {
  const auto& n = ctx.norms();
  const int T = std::min(1000, n.config.T);
  const double lin = n.mean_at("linear", T, 'S'), v = n.mean_at("vla", T, 'S'), dn = n.mean_at("deltanet", T, 'S');
  double vmax = 0;
  for (const auto& s : n.series)
    if (s.mixer == "vla") vmax = std::max(vmax, *std::max_element(s.S.begin(), s.S.begin() + T));
  // Linear attention ~1600 (1630 in the caption): within a factor 2, the input distribution being
  // unstated. VLA "below 15": the largest ||S_t||_F over t <= 1000 and all seeds must be < 15.
  const bool a = lin >= 800 && lin <= 3200, b = vmax < 15;
  r.measured = fmt::format("d_h = 32, t = {}, mean over seeds {}, double, Sec. 6.2 random inputs: linear {:.4g}, DeltaNet {:.4g}, "
                           "VLA {:.4g} (max over t, seeds: {:.4g}); ratio linear/VLA {:.1f}x",
                           T, fmt::join(n.config.seeds, ","), lin, dn, v, vmax, lin / v);
  r.verdict = from_counts(a + b, 2);
  if (!a) r.counterexample += fmt::format("linear attention ||S_1000||_F = {:.4g}, not within a factor 2 of 1600; ", lin);
  if (!b) r.counterexample += fmt::format("VLA max ||S_t||_F = {:.4g} >= 15; ", vmax);
  r.artifacts = {ctx.rel("state_norms.png"), ctx.rel("state_norms.csv")};
}

void fig4_A(ClaimsContext& ctx, ClaimResult& r) {
  const auto& n = ctx.norms();
  const int T = std::min(1000, n.config.T);
  const double a1 = n.mean_at("vla", 1, 'A'), aT = n.mean_at("vla", T, 'A');
  // "from ~56": within 10% (A_0 = 10 I gives 56.6 at d_h = 32); "to ~10": within a factor 2.
  const bool a = std::abs(a1 / 56 - 1) <= 0.1, b = aT >= 5 && aT <= 20;
  r.measured = fmt::format("VLA, d_h = 32, lambda0 = 0.1, refresh 1e-3 I every 20 steps, double, mean over seeds: "
                           "||A_1||_F = {:.4g}, ||A_{}||_F = {:.4g}", a1, T, aT);
  r.verdict = from_counts(a + b, 2);
  if (!a) r.counterexample += fmt::format("||A_1||_F = {:.4g} not within 10% of 56; ", a1);
  if (!b) r.counterexample += fmt::format("||A_{}||_F = {:.4g} not within a factor 2 of 10; ", T, aT);
  r.artifacts = {ctx.rel("A_norms.png"), ctx.rel("A_norms.csv")};
}

// ---- Sec. 7.2 ----
void sec72(ClaimsContext&, ClaimResult& r) {
  MixerConfig base;
  MixerConfig rls = base;
  rls.penalty.lambda0 = 1e-10;
  // "orthogonal": at most 10% of the keys' correlation may survive in the write direction.
  const double tol = 0.1;
  std::string m = "d_h = 32, double, |k_1 . alpha_hat_2| / |k_1 . k_hat_2| (0 = orthogonal):";
  bool alg1 = true, other = false;
  std::string ce;
  for (double rho : {0.3, 0.9}) {
    const double v = residual_write_correlation("vla", base, 32, rho, 42);
    const double vk = residual_write_correlation("vla-key", base, 32, rho, 42);
    const double cr = residual_write_correlation("rls-classical", rls, 32, rho, 42);
    const double dn = residual_write_correlation("deltanet", base, 32, rho, 42);
    m += fmt::format(" rho {}: VLA (Alg. 1, u = W_u k) {:.3f}, VLA with u = k_hat/sqrt(d_h) {:.3f}, classical RLS (lambda0 1e-10) {:.2e}, "
                     "DeltaNet {:.3f};", rho, v, vk, cr, dn);
    if (v > tol) { alg1 = false; ce += fmt::format("Alg. 1 at rho = {}: {:.3f} of the correlation survives; ", rho, v); }
    other = other || vk <= tol || cr <= tol;
  }
  r.measured = m;
  r.verdict = alg1 ? Verdict::Holds : (other ? Verdict::Partial : Verdict::Fails);
  if (!alg1 && other) ce += "holds only in the classical RLS limit (u = k_hat, lambda0 -> 0, prior-A gain)";
  r.counterexample = ce;
}

// ---- Remark 1 ----
void remark1(ClaimsContext&, ClaimResult& r) {
  const MixerConfig base;
  const auto red = remark1_reduction(32, 1000, 42, base);
  // alpha_hat = unit(lambda0^-1 k_hat) = k_hat up to a few roundings: 16 u. With e_t = v_t the two
  // recurrences perform the same operations up to rounding: 16 n u for n = 32 writes.
  const bool a = red.max_alpha_dev <= 16 * kU, b = red.S_dev_orthonormal <= 16 * 32 * kU;
  r.measured = fmt::format("vla-fixed-a vs linear attention with normalised keys, d_h = 32, double: max_t ||alpha_hat - k_hat||_inf = {:.2e}; "
                           "after 32 orthonormal keys (e_t = v_t) ||S_a - S_b||/||S_b|| = {:.2e}; after 1000 random tokens "
                           "(e_t != v_t, outside the remark's condition) {:.3g}",
                           red.max_alpha_dev, red.S_dev_orthonormal, red.S_dev_random);
  r.verdict = from_counts(a + b, 2);
}

// ---- seed 004 sec. 4: the chunkwise form is the recurrence ----
void chunkwise(ClaimsContext&, ClaimResult& r) {
  // mp50 carries ~166 bits: the two orders of summation differ by at most a few thousand roundings of
  // 2^-166 ~ 1e-50, so anything above 1e-40 is a different function, not rounding.
  const std::vector<int> chunks{1, 2, 5, 8, 16, 36, 37, 64};
  int held = 0;
  std::string measured = "mp50, T = 37 (prime), d = 6, chunk sizes 1, 2, 5, 8, 16, 36, 37, 64, max over chunks of "
                         "||O_chunked - O_recurrent||/||O_recurrent||:";
  const HeadStream s = chunk_test_stream(6, 37, 11);
  for (const auto& rule : kChunkedRules) {
    const auto e = chunked_exactness_mp50(rule, s, chunks);
    measured += fmt::format(" {} {:.1e} (chunk {});", rule, e.max_rel_diff, e.worst_chunk);
    if (e.max_rel_diff <= 1e-40) ++held;
    else r.counterexample += fmt::format("{}: chunk {} differs by {:.3g}; ", rule, e.worst_chunk, e.max_rel_diff);
  }
  r.measured = measured;
  r.verdict = from_counts(held, int(kChunkedRules.size()));
}

// ---- Sec. 3.4, Alg. 2 line 13: the A-loop's denominator prevents direct parallelism ----
void alg1_parallel(ClaimsContext&, ClaimResult& r) {
  // The claim is refuted by a parallel form that is Algorithm 1: the chunkwise VLA of
  // docs/chunkwise-vla.md, equal to the recurrence in mp50 (<= 1e-40, as chunkwise-exact) with the
  // guard idle and firing under both policies. d = 6: delta_t in [1, 1 + 10/6], so eps = 2 fires on some
  // tokens.
  const std::vector<int> chunks{2, 5, 8, 16, 20, 37, 64};
  const HeadStream s = chunk_test_stream(6, 37, 11);
  VlaOptions alg1, clamp, skip, no_refresh;
  clamp.penalty.eps = skip.penalty.eps = 2.0;
  skip.penalty.policy = DeltaPolicy::SkipAddEps;
  no_refresh.penalty.refresh_period = 0;
  std::string m = "chunkwise VLA ((V1)-(V5): per chunk of C tokens one C x C L D L^T of I + U A_c U^T, the rest matrix products) "
                  "against Algorithm 1, mp50, T = 37, d = 6, C in {2, 5, 8, 16, 20, 37, 64}, max over C of ||O_chunked - O||/||O||:";
  int exact = 0;
  for (const auto& [name, opt] : {std::pair{"Alg. 1 (refresh every 20)", alg1}, std::pair{"no refresh", no_refresh},
                                  std::pair{"clamp firing (eps = 2)", clamp}, std::pair{"skip firing (eps = 2)", skip}}) {
    const auto e = vla_chunked_exactness_mp50(opt, s, chunks);
    m += fmt::format(" {} {:.1e} ({} chunks at C = 64, guard on {} tokens);", name, e.max_rel_diff, e.chunks, e.guard_fired);
    if (e.max_rel_diff <= 1e-40) ++exact;
    else r.counterexample += fmt::format("{}: chunk {} differs by {:.3g}; ", name, e.worst_chunk, e.max_rel_diff);
  }
  m += " chunks end on the refresh steps (Alg. 1 line 16), so at the paper's period 20 a chunk holds at most 20 tokens.";
  // Across chunks: the penalty chain ((P1)-(P3)), A at every group start from one 2d x 2d product per group
  // and one d x d solve, against the tracker stepping every token (T = 150: 8 refresh segments).
  const HeadStream longer = chunk_test_stream(6, 150, 12);
  const auto pc = penalty_chain_exactness_mp50(alg1, longer, {1, 3, 8});
  m += fmt::format(" Penalty chain (A across refresh segments as [X; Z] <- [[I + eta G, eta I], [G, I]] [X; Z], G the segment's Gram), "
                   "T = 150, groups of 1, 3, 8 segments: max over {} group starts of ||A_chain - A||/||A|| {:.1e}",
                   pc.groups, pc.max_rel_diff);
  if (pc.max_rel_diff <= 1e-40) ++exact;
  else r.counterexample += fmt::format("penalty chain: groups of {} differ by {:.3g}; ", pc.worst_group, pc.max_rel_diff);
  r.measured = m;
  if (exact == 5) {
    r.verdict = Verdict::Fails;
    r.counterexample = "the delta_t of a chunk are the pivots of one unpivoted L D L^T of I + U A_c U^T: T sequential steps become "
                       "T / C chunk steps of matrix products, equal to Algorithm 1 in exact arithmetic; and across chunks the A-loop is "
                       "a linear recurrence of 2d x 2d matrices (the Riccati linearisation), so only one d x d solve per group of "
                       "chunks stays sequential";
  } else {
    r.verdict = Verdict::Partial;  // a wrong parallel form refutes nothing, and confirms nothing either
    r.counterexample = "the toolkit's chunked form is not Algorithm 1 here (" + r.counterexample + "): the claim is not refuted";
  }
}

// ---- seed 004 sec. 5.1: a decay bounds the memory ----
void decay_bounded(ClaimsContext& ctx, ClaimResult& r) {
  const int T = ctx.cfg.quick ? 2000 : 20000, d = 32;
  // B_t is a triangle inequality over t terms: only rounding can break it (16 t u, as Prop. 1's).
  const double tol = 16.0 * T * kU;
  int bound_held = 0, flat = 0;
  std::string m = fmt::format("d_h = {}, T = {}, seed 42, double, Sec. 6.2 random inputs: max_t (||S_t|| - B_t)/B_t and mean ||S_t|| over the last tenth / over (0.4 T, 0.5 T]:", d, T);
  for (const char* rule : {"retnet", "mamba2"}) {
    const auto b = decay_bound(rule, d, T, 42);
    m += fmt::format(" {} {:.2g}, {:.4f} (||S_T||_F = {:.4g});", rule, b.max_excess, b.growth, b.S_T);
    bound_held += b.max_excess <= tol;
    // A stationary norm fluctuates: over windows of T/10 tokens and a horizon (1 - gamma)^-1 ~ 32 the
    // window means vary by a few percent. Growth like t (linear attention: phi(k) > 0, the writes add
    // up) gives 0.95 / 0.45 = 2.1, like sqrt(t) (writes of random sign) 1.45; 1.2 separates them.
    flat += b.growth <= 1.2;
    if (b.max_excess > tol) r.counterexample += fmt::format("{}: ||S_t|| exceeds B_t by a relative {:.3g}; ", rule, b.max_excess);
    if (b.growth > 1.2) r.counterexample += fmt::format("{}: ||S_t|| still grows by {:.1f}% over the second half; ", rule, 100 * (b.growth - 1));
  }
  const auto lin = decay_bound("linear", d, T, 42);
  r.measured = m + fmt::format(" for contrast linear attention (gamma = 1) {:.4f} (||S_T||_F = {:.4g}, growing)", lin.growth, lin.S_T);
  r.verdict = bound_held < 2 ? Verdict::Fails : (flat == 2 ? Verdict::Holds : Verdict::Partial);
}

// ---- seed 003 Lemma 3.1, eq. 3.4, sec. 4.2: FALCON-2's NLMS step descends for beta in (0, 2) ----
void falcon2_descent(ClaimsContext& ctx, ClaimResult& r) {
  const std::vector<double> inside{0.05, 0.5, 1.0, 1.5, 1.95, 1.999}, outside{2.05, 2.5, 3.0};
  std::vector<double> betas = inside;
  betas.insert(betas.end(), outside.begin(), outside.end());
  const std::vector<int> dims{1, 2, 8, 32};
  const int trials = ctx.cfg.quick ? 25 : 200;
  const auto mp = nlms_descent<mp50>(betas, dims, trials, 3);
  const auto dbl = nlms_descent<double>(betas, dims, trials, 3);
  // Eq. (3.5) is an exact-arithmetic inequality (for this quadratic loss it is tight along x): mp50 carries
  // ~1e-50 relative per operation and a step is a few thousand of them, so an excess above 1e-40 is real.
  const double tol = 1e-40;
  int inside_ok = 0, outside_ascends = 0;
  std::string m = fmt::format("FALCON-2's write (nlms_write: ridge {}, eps {}), d in {{1, 2, 8, 32}}, {} random (S, x, y) per d, x scaled by "
                              "10^U(-2, 2); mp50, per beta: steps with l(S_t) > l(S_{{t-1}}), max l(S_t)/l(S_{{t-1}}), max eq. 3.5 excess "
                              "(relative, <= 0 when it holds):",
                              FalconOptions{}.ridge, NlmsOptions{}.eps, trials);
  for (std::size_t i = 0; i < betas.size(); ++i) {
    const auto& a = mp[i];
    const bool in = i < inside.size();
    m += fmt::format(" beta {}: {} of {} ascend, ratio {:.4g}, excess {:.2g};", a.beta, a.ascents, a.steps, a.max_ratio, a.max_excess);
    if (in && a.ascents == 0 && a.max_excess <= tol) ++inside_ok;
    if (in && (a.ascents > 0 || a.max_excess > tol))
      r.counterexample += fmt::format("beta {} (inside (0, 2)): {} ascents, eq. 3.5 excess {:.3g}; {}; ", a.beta, a.ascents, a.max_excess, a.first_ascent);
    if (!in && a.ascents > 0) ++outside_ascends;
  }
  int dbl_ascents = 0;
  double dbl_excess = -1;
  for (std::size_t i = 0; i < inside.size(); ++i) {
    dbl_ascents += dbl[i].ascents;
    dbl_excess = std::max(dbl_excess, dbl[i].max_excess);
  }
  m += fmt::format(" double, inside (0, 2): {} ascents, max excess {:.2g}.", dbl_ascents, dbl_excess);
  for (std::size_t i = inside.size(); i < betas.size(); ++i)
    if (mp[i].ascents > 0) {
      m += fmt::format(" Outside, the smallest ascent at beta {}: {}.", mp[i].beta, mp[i].first_ascent);
      break;
    }
  r.measured = m;
  if (inside_ok < int(inside.size())) r.verdict = Verdict::Fails;
  else if (outside_ascends == 0) {
    r.verdict = Verdict::Partial;
    r.counterexample = "descent held inside (0, 2), but no gain outside it ascended on these inputs: the interval's edge is not shown";
  } else {
    r.verdict = Verdict::Holds;
  }
}

// ---- seed 003 sec. 4.1: the NLMS step is invariant to the write feature's scale ----
void falcon2_scale(ClaimsContext& ctx, ClaimResult& r) {
  const std::vector<double> scales{1e-3, 0.1, 10, 1e3};
  const int d = 8, steps = ctx.cfg.quick ? 64 : 512;
  const double eps = NlmsOptions{}.eps;
  const auto exact = nlms_scale_invariance<mp50>(scales, 0.0, d, steps, 5);
  const auto dbl = nlms_scale_invariance<double>(scales, 0.0, d, steps, 5);
  const auto stab = nlms_scale_invariance<mp50>(scales, eps, d, steps, 5);
  // Exact in exact arithmetic: mp50 rounds at ~1e-50 per operation, the recurrence contracts (beta in
  // (0, 2)), so the two runs may part by a few thousand roundings: 1e-40.
  const double tol = 1e-40;
  int held = 0;
  std::string m = fmt::format("FALCON-2 (d = {}, T = {}, per-row gains 2 sigmoid(N(0, 1)), ridge {}) on x_t and on c x_t, max_t of "
                              "||r'_t - r_t||/||r_t|| and ||c S'_t - S_t||/||S_t||; eps = 0, mp50:",
                              d, steps, FalconOptions{}.ridge);
  for (const auto& e : exact) {
    m += fmt::format(" c = {:g}: {:.1e}, {:.1e};", e.c, e.max_residual, e.max_state);
    if (std::max(e.max_residual, e.max_state) <= tol) ++held;
    else r.counterexample += fmt::format("c = {:g}: residuals part by {:.3g}, states by {:.3g}; ", e.c, e.max_residual, e.max_state);
  }
  m += " double, eps = 0:";
  for (const auto& e : dbl) m += fmt::format(" c = {:g}: {:.1e}, {:.1e};", e.c, e.max_residual, e.max_state);
  m += fmt::format(" mp50 with the rule's eps = {:g} (approximate: each run's eta is off by ~eps / ||x||^2, ||x||^2 ~ {} c^2, "
                   "so the runs part by about that share at the smaller of 1 and c):", eps, d);
  for (const auto& e : stab) m += fmt::format(" c = {:g}: {:.1e}, {:.1e};", e.c, e.max_residual, e.max_state);
  r.measured = m + " (the rules feed the step RMSNorm(k), ||x||^2 ~ d, where eps's share is ~eps / d)";
  r.verdict = from_counts(held, int(exact.size()));
}

// ---- seed 003 sec. 4.4: the sliding-window rules' state is S and the last B - 1 pairs ----
void falcon3_window_state(ClaimsContext&, ClaimResult& r) {
  // Continuing with the payload performs the same operations on the same numbers as the one-go run:
  // equal to the last bit in mp50, so any difference above 1e-40 is another recurrence. One pair short (or
  // S alone) must differ by far more than rounding for the payload to be the minimal one: > 1e-10.
  const int d = 5, T = 23, T1 = 10;
  int held = 0, cases = 0;
  std::string m = fmt::format("mp50, d = {}, T = {}, cut after {} tokens, ||O_continued - O_one_go|| / ||O_one_go|| over the rest, "
                              "continuing from S_T1 and the newest p pairs (p = B - 1 | B - 2 | 0):", d, T, T1);
  for (const char* rule : {"falcon3", "falcon3a"})
    for (const int B : {1, 2, 4}) {
      const auto w = window_continuation(rule, B, d, T, T1, 11);
      ++cases;
      const bool minimal = B == 1 || (w.one_pair_short > 1e-10 && w.state_alone > 1e-10);
      m += fmt::format(" {} B = {}: {:.1e} | {} | {:.2g};", rule, B, w.with_payload,
                       B >= 2 ? fmt::format("{:.2g}", w.one_pair_short) : std::string("-"), w.state_alone);
      if (w.with_payload <= 1e-40 && minimal) ++held;
      else
        r.counterexample += fmt::format("{} B = {}: payload {:.3g}, one pair short {:.3g}, S alone {:.3g}; ", rule, B,
                                        w.with_payload, w.one_pair_short, w.state_alone);
    }
  r.measured = m + " (B = 1: the payload is empty and S alone is exact)";
  r.verdict = from_counts(held, cases);
}

// ---- seed 002 Theorem 3.3: the vocabulary decomposition's error decays with the levels ----
void mva_levels(ClaimsContext& ctx, ClaimResult& r) {
  MvaDecompositionConfig c;  // m = d = 8, n = 2m, 4m, 8m, c = 1..6, 3 seeds, mp50 and double
  if (ctx.cfg.quick) {
    c.ns = {16, 32};
    c.max_levels = 5;
    c.seeds = {42, 43};
  }
  const auto pts = mva_decomposition_error(c);
  // The bound compares exact quantities: in mp50 only rounding (~1e-48 relative) can cross it, in double
  // a few n c roundings: 16 n c u. "Decays": every series (precision, selection, n) is non-increasing in c
  // to the same tolerance, and its last level is below its first.
  auto slack = [](const MvaDecompositionPoint& p) { return p.precision == "mp50" ? 1e-40 : 16.0 * p.n * p.levels * kU; };
  int within = 0;
  std::map<std::tuple<std::string, std::string, int>, std::vector<const MvaDecompositionPoint*>> series;  // c = 1.. in order
  std::map<std::string, const MvaDecompositionPoint*> first_over;  // per selection: the smallest (n, c) over the bound
  io::CsvTable csv({"mp50", "one_hot", "n", "levels", "rel_error", "bound"});
  for (const auto& p : pts) {
    const bool ok = p.rel_error <= p.bound * (1 + slack(p));
    within += ok;
    series[{p.precision, p.selection, p.n}].push_back(&p);
    if (!ok && p.precision == "mp50" && !first_over.count(p.selection)) first_over[p.selection] = &p;
    csv.add_row({double(p.precision == "mp50"), double(p.selection == "one-hot"), double(p.n), double(p.levels), p.rel_error, p.bound});
  }
  std::filesystem::create_directories(ctx.dir);
  csv.write(ctx.dir / "mva_decomposition.csv");
  int decaying = 0;
  std::string growing;
  std::string m = fmt::format("MVA's key residual R(c) = ||K^(c)||_F / ||K||_F (rule mva, W_i = I so gamma_i = 1), m = d = {}, q, k, v N(0, 1), "
                              "gate logits N(2, 1), mean over seeds {}, c = 1..{}; bound ((n - m)/n)^c. mp50:",
                              c.d, fmt::join(c.seeds, ","), c.max_levels);
  for (const auto& [key, v] : series) {
    const auto& [precision, selection, n] = key;
    bool mono = v.back()->rel_error < v.front()->rel_error;
    for (std::size_t i = 1; i < v.size(); ++i) mono = mono && v[i]->rel_error <= v[i - 1]->rel_error * (1 + 1e-12);
    decaying += mono;
    if (!mono && growing.empty())
      growing = fmt::format("{} {} n = {}: R = {:.4f} at c = 1, {:.4f} at c = {} (does not decay); ", precision, selection, n,
                            v.front()->rel_error, v.back()->rel_error, v.back()->levels);
    if (precision != "mp50") continue;
    std::vector<double> R, B;
    for (const auto* p : v) { R.push_back(p->rel_error); B.push_back(p->bound); }
    // The measured rate per level, (R(c_max) / R(1))^(1 / (c_max - 1)), beside the theorem's eps = (n - m)/n.
    const double rate = R.size() > 1 ? std::pow(R.back() / R.front(), 1.0 / double(R.size() - 1)) : 1.0;
    m += fmt::format(" {} n = {}: R = [{:.3f}] (x{:.3f} per level; eps = {:.3f}) vs bound [{:.3f}];", selection, n, fmt::join(R, ", "),
                     rate, double(n - c.d) / n, fmt::join(B, ", "));
  }
  double worst_double = 0;  // double against mp50, the same cell
  for (const auto& p : pts)
    if (p.precision == "double")
      for (const auto& q : pts)
        if (q.precision == "mp50" && q.selection == p.selection && q.n == p.n && q.levels == p.levels)
          worst_double = std::max(worst_double, std::abs(p.rel_error - q.rel_error) / q.rel_error);
  r.measured = m + fmt::format(" double agrees with mp50 to {:.1e} relative; {} of {} cells within the bound, {} of {} series decaying",
                               worst_double, within, pts.size(), decaying, series.size());
  r.verdict = within == int(pts.size()) ? Verdict::Holds : (decaying == int(series.size()) ? Verdict::Partial : Verdict::Fails);
  for (const auto& [sel, p] : first_over)
    r.counterexample += fmt::format("{}: n = {}, c = {} (the smallest over the bound): R = {:.4f} > {:.4f}; ", sel, p->n, p->levels,
                                    p->rel_error, p->bound);
  r.counterexample += growing;
  if (r.counterexample.ends_with("; ")) r.counterexample.resize(r.counterexample.size() - 2);
  r.artifacts = {ctx.rel("mva_decomposition.csv")};
}

// ---- 001 precision requirement ----
void precision(ClaimsContext& ctx, ClaimResult& r) {
  const auto cfg = ctx.atlas_config();
  // "Catastrophic": a non-finite value, A_t losing positive definiteness, or an output error of 10% or
  // more vs mp50 at some t. "float32 is enough": float's worst output error stays below 1e-3.
  auto catastrophic = [](const AtlasCell& c) { return c.first_nonfinite > 0 || c.first_A_not_pd > 0 || c.max_out_err() >= 0.1; };
  std::map<std::string, const AtlasCell*> cell;
  for (const auto& c : ctx.atlas())
    if (c.mixer == "vla" && c.policy == "clamp") cell[c.precision] = &c;
  std::string m = fmt::format("VLA (Alg. 1, clamp), d_h = {}, T = {}, vs mp50: max_t output error", cfg.d_head, cfg.T);
  for (const auto& [p, c] : cell)
    m += fmt::format("; {} {:.2e}{}{}", p, c->max_out_err(),
                     c->first_nonfinite ? fmt::format(" (non-finite at t = {})", c->first_nonfinite) : "",
                     c->first_A_not_pd ? fmt::format(" (A not PD at t = {})", c->first_A_not_pd) : "");
  const bool h = cell.count("half") && catastrophic(*cell["half"]);
  const bool bf = cell.count("bfloat16") && catastrophic(*cell["bfloat16"]);
  const bool fl = cell.count("float") && cell["float"]->max_out_err() < 1e-3 && !catastrophic(*cell["float"]);
  r.measured = m;
  r.verdict = from_counts(int(h) + int(bf) + int(fl), 3);
  if (!h) r.counterexample += "half is not catastrophic at this T; ";
  if (!bf) r.counterexample += "bfloat16 is not catastrophic at this T; ";
  if (!fl) r.counterexample += "float is not accurate to 1e-3; ";
  r.artifacts = {ctx.rel("precision_vla.png"), ctx.rel("atlas_summary.csv")};
}

}  // namespace

const std::vector<Claim>& claim_registry() {
  static const std::vector<Claim> reg{
      {"prop1-bounded-state", "000 Prop. 1, eq. 13",
       "||S_t||_F <= ||S_0||_F + sum_s ||e_s||, and ||S_t||_F converges to a finite plateau under bounded inputs",
       "eq. 13 excess <= 16 T u (rounding only); plateau: ||S_T|| / ||S_{T/2}|| <= 1.05. partial = bound only", prop1},
      {"prop2-unit-jacobian", "000 Prop. 2, eq. 14, App. A.2",
       "||J_t||_2 = ||I - alpha_hat k_hat^T||_2 = 1 for all unit k_hat, alpha_hat, all t and d_h",
       "any unit pair with norm > 1 + 1e-30 (mp50), or a trajectory step > 1 + 16u (double), is a counterexample", prop2},
      {"cor-gradient-flow", "000 Cor. 1 and Cor. 2",
       "||prod_s J_s||_2 <= 1: gradients neither explode nor vanish through the recurrence",
       "product norm <= 1 + 16 T u over T = 25; partial = product > 1 but largest Lyapunov exponent <= 0.01/step", corollary},
      {"prop3-exact-recovery", "000 Prop. 3, Sec. 4.3",
       "linearly independent keys, n <= d_h: S_n k_hat_i = v_i for all i (exact arithmetic)",
       "mp50 max relative error <= 1e-30 for every key family; partial = orthonormal keys only", prop3},
      {"table2-jacobian-norms", "000 Table 2, Sec. 4.2",
       "VLAv2 ||J_t||_2 = 5.36, 13.50, 20.48, 26.47 and after T=25 1.7e18, 1.8e28, 6.1e32, 3.7e35 (d_h 32..128); VLAv3 1.000 and 1.000",
       "VLAv2: ||J|| within a factor 2, product within 2 decades; VLAv3: within 5e-4 of 1. partial = some cells", table2},
      {"fig4-state-norms", "000 Sec. 6.2, Fig. 4 (left), Sec. 4.1",
       "at T = 1000 linear attention ||S||_F ~ 1600 (1630), VLA below 15",
       "linear within a factor 2 of 1600; VLA max_t ||S_t||_F < 15. partial = one of two", fig4_S},
      {"fig4-A-norm-decay", "000 Sec. 6.2, Fig. 4 (right)", "||A_t||_F decays from ~56 to ~10 over 1000 steps",
       "start within 10% of 56; end within a factor 2 of 10. partial = one of two", fig4_A},
      {"sec72-orthogonal-write", "000 Sec. 7.2",
       "for correlated keys (k_1.k_2 = rho) the write direction for k_2 under A_1 is ∝ k_2 - rho k_1, orthogonal to k_1",
       "|k_1.alpha_hat_2| / |k_1.k_hat_2| <= 0.1 for rho in {0.3, 0.9} with Alg. 1; partial = only other VLA configurations", sec72},
      {"remark1-reduction", "000 Remark 1, Sec. 4.4",
       "A_t = lambda0^-1 I fixed gives alpha_hat = k_hat; with e_t ~ v_t the update is linear attention with normalised keys",
       "alpha_hat = k_hat within 16u; S equal within 16 n u when e_t = v_t (orthonormal keys). partial = one of two", remark1},
      {"precision-fp16-bf16", "001 Precision Requirements",
       "updates must be float32; bf16 or fp16 lead to catastrophic instability through A_t",
       "catastrophic = non-finite, A not PD, or output error >= 10% vs mp50; float must stay < 1e-3. partial = some of three", precision},
      {"chunkwise-exact", "004 Sec. 4 (chunkwise parallel form)",
       "the chunkwise-parallel form computes the recurrence's outputs exactly (linear attention, decayed forms, the delta rule's UT form, "
       "FALCON-2's per-channel systems), for any chunk size",
       "mp50: relative difference <= 1e-40 for every chunk size, T not a multiple of it; partial = some rules", chunkwise},
      {"alg1-no-direct-parallelism", "000 Sec. 3.4, Alg. 2 line 13",
       "the A_t loop has a data-dependent denominator delta_t that prevents direct parallelism",
       "fails if a chunkwise-parallel form equals Algorithm 1 in mp50 (<= 1e-40) for every chunk size, refresh and guard setting",
       alg1_parallel},
      {"decay-bounded-state", "004 Sec. 5.1-5.3 (RetNet, Mamba-2)",
       "a decay gamma in (0, 1) bounds the memory: S_t = sum_j gamma^(t-j) k_j^T v_j, older tokens exponentially downweighted",
       "||S_t||_F <= B_t = gamma_t B_{t-1} + ||k_t|| ||v_t|| within 16 T u (double), and mean ||S_t|| over the last tenth <= 1.2 x "
       "over (0.4 T, 0.5 T] (no growth); "
       "partial = bound only",
       decay_bounded},
      {"falcon2-nlms-descent", "003 Lemma 3.1, eqs. 3.4-3.5, sec. 4.2 (eq. 4.4)",
       "FALCON-2's step with per-column gains beta_j in (0, 2) decreases its ridge regression loss at every step, by at least "
       "sum_j eta_j (2 - eta_j L)/2 ||grad_j||^2 (L = ||x||^2 + lambda); outside (0, 2) descent is not guaranteed",
       "mp50: no ascent and eq. 3.5 excess <= 1e-40 for every beta in (0, 2) tried; holds = that and an ascent for some beta > 2 "
       "(the interval is the right one); partial = descent inside but no ascent outside",
       falcon2_descent},
      {"falcon2-nlms-scale-invariance", "003 Sec. 4.1 (Scaled DeltaNet)",
       "with eps = 0 and the scaled ridge, rescaling the write feature x_t -> c x_t leaves the decay and the projector eta x x^T "
       "unchanged: the memory becomes S_t / c and every residual is unchanged",
       "mp50, eps = 0: max relative difference of residuals and of c S'_t vs S_t <= 1e-40 for c in {1e-3, 0.1, 10, 1e3}; "
       "partial = some c",
       falcon2_scale},
      {"falcon3-window-state", "003 Sec. 4.4 (Exact streaming state), Algorithm 3",
       "for FALCON-3 and FALCON-3A the matrix state S_t alone is not Markov: exact continuation across a segment boundary "
       "needs the last B - 1 causal pairs besides S_t",
       "mp50: continuing from S and the newest B - 1 pairs equals the one-go run to <= 1e-40, and from B - 2 pairs or S alone "
       "it differs by > 1e-10 (B in {1, 2, 4}, both rules); partial = some cases",
       falcon3_window_state},
      {"mva-levels-error-decay", "002 Theorem 3.3 (= C.1), eq. 4-5",
       "after c levels of the vocabulary decomposition the error is ||E|| <= ||K|| prod eps_i prod gamma_i with eps_i = (n - m)/n: "
       "it decays exponentially with the levels",
       "MVA's ||K^(c)||_F / ||K||_F (mean over seeds) <= ((n - m)/n)^c (gamma_i = 1: no W_i) for n in {2m, 4m, 8m}, c = 1..6, one-hot S "
       "and softmax, within rounding (mp50 1e-40, double 16 n c u); partial = above the bound but decaying in c in every series",
       mva_levels},
      // Training claims: decided by the studies named last (studies/<id>/, `vla study run`).
      {"fig5-mqar-capacity", "000 Fig. 5, Tables 9, 11", "MQAR accuracy vs n_pairs: VLA 1.000 for n <= 24, DeltaNet collapses to 0.010", "needs training", {},
       {"fig5-mqar-capacity", "table9-per-seed", "table11-capacity-curve"}},
      {"fig6-long-context", "000 Fig. 6", "n = 8, T up to 512: VLA 1.000 at all T", "needs training", {}, {"fig6-mqar-long-context"}},
      {"fig7-copy-task", "000 Fig. 7, Table 7", "copy task: all four models reach 100% by step ~150", "needs training", {}, {"fig7-copy"}},
      {"fig8-overload", "000 Fig. 8, Table 10", "overload n in {32, 48}: VLA 62% at the capacity boundary", "needs training", {},
       {"fig8-overload", "table10-capacity-boundary"}},
      {"fig9-ood-keys", "000 Fig. 9, Table 13", "OOD key generalisation", "needs training", {}, {"fig9-ood"}},
      {"table4-ablations", "000 Table 4", "ablations at n_pairs = 16, d = 128, H = 4", "needs training", {}, {"table4-ablation"}},
      {"table8-mqar-logs", "000 Table 8", "VLA MQAR training logs n in {8, 16, 24}", "needs training", {}, {"table8-vla-training-logs"}},
      {"table12-steps", "000 Table 12", "n = 24 accuracy, 2000 vs 1000 steps", "needs training", {}, {"table12-steps-effect"}},
      {"sec3-direction-selective-writes", "000 Sec. 3, Sec. 7.1-7.2",
       "A_t's per-direction selectivity routes each write orthogonally to the stored keys (A_1 k_2 ∝ k_2 - rho k_1); this is the "
       "mechanism behind VLA's recall within capacity",
       "needs training", {}, {"penalty-selectivity"}},
  };
  return reg;
}

}  // namespace vla::analysis
