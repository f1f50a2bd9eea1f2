// FALCON-2 and FALCON-2A (seed 003; core/rules/falcon2/, core/rules/falcon2a/, core/rules/nlms_memory.hpp),
// checked like the other rules: the forward against the paper's equations written out here in mp50 (in
// the paper's orientation, column by column), the clamped decay against the paper's log-space reduction,
// every precision against mp100, the backward (per-channel gains, the ridge and the RMSNorm features)
// against central differences in double and mp50.
#include "mixer_gradcheck.hpp"

#include "../core/precision_case.hpp"
#include "analysis/chunked_exactness.hpp"
#include "analysis/nlms_step.hpp"
#include "core/rules/gpu_support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

using namespace vla;

namespace {
using P50 = Precision<mp50>;

MixerConfig mixer(const std::string& name) {
  MixerConfig mc;
  mc.mixer = name;
  return mc;
}

Vec<mp50> column50(const Mat<double>& m, int t) { return cast_vector<mp50>(Vec<double>(m.col(t))); }

// Seed 003 sec. 4.1's RMSNorm written out: u / (sqrt(u . u / d) + eps_rms).
Vec<mp50> rms_norm_ref(const Vec<mp50>& u, const mp50& eps) {
  return u / mp50(sqrt(mp50(u.dot(u) / mp50(static_cast<int>(u.size())))) + eps);
}

// The paper's recurrence in its own orientation: S (d_x, d_v), column j the value channel j, updated by
// eq. (4.5) (regression, FALCON-2: per-column gains from gate row j) or eq. (4.7) (inner product,
// FALCON-2A: one gain from gate row 0), with alpha = min(lambda eta, 1 - eps_gamma) (sec. 4.2) and the
// read o_t = S_t^T RMSNorm(q_t). Outputs as rows (T, d); `clamped` counts the (t, j) where the clamp acted.
Mat<mp50> falcon_reference(const analysis::HeadStream& s, const NlmsOptions& opt, bool regression, int& clamped) {
  const int d = s.d;
  const mp50 eps(opt.eps), ridge(opt.falcon.ridge), alpha_max = mp50(1) - mp50(opt.falcon.eps_gamma);
  Mat<mp50> S = Mat<mp50>::Zero(d, d), O(s.T, d);
  clamped = 0;
  for (int t = 0; t < s.T; ++t) {
    const Vec<mp50> x = rms_norm_ref(column50(s.k, t), eps), y = column50(s.v, t), qf = rms_norm_ref(column50(s.q, t), eps);
    const mp50 lambda = ridge * x.dot(x);  // the scaled ridge, lambda_t = lambda_bar ||x_t||^2
    for (int j = 0; j < d; ++j) {
      const mp50 beta = 2 / (1 + exp(-mp50(s.gate(regression ? j : 0, t))));
      const mp50 eta = beta / (x.dot(x) + lambda + eps);  // eq. (3.4) / (4.8)
      mp50 alpha = lambda * eta;
      if (alpha > alpha_max) { alpha = alpha_max; ++clamped; }
      const Vec<mp50> sj = S.col(j);
      const mp50 r = regression ? mp50(y(j) - x.dot(sj)) : y(j);  // the residual of eq. (4.5); y_j alone in eq. (4.7)
      S.col(j) = (1 - alpha) * sj + eta * r * x;
    }
    O.row(t) = (S.transpose() * qf).transpose();
  }
  return O;
}

template <class Rule> Mat<mp50> rule_run(const NlmsOptions& opt, const analysis::HeadStream& s) {
  return analysis::rule_outputs<mp50>(Rule(opt), s);
}

double rel_diff(const Mat<mp50>& a, const Mat<mp50>& b) { return to_double(mp50((a - b).norm() / b.norm())); }
}  // namespace

TEST_CASE("FALCON-2 forward equals eq. (4.5) column by column in mp50, clamp idle and acting", "[train][falcon]") {
  // If this fails, the rule writes another update: a gain shared across channels (the gate's rows mixed up),
  // the decay applied to the wrong axis (value vs key channels), the ridge not scaled by ||x||^2, the
  // clamp not min(lambda eta, 1 - eps_gamma), RMSNorm not u / (RMS(u) + eps), or the read before the write.
  const analysis::HeadStream s = analysis::chunk_test_stream(6, 23, 4);
  NlmsOptions idle, acting;
  acting.falcon.ridge = 5.0;  // eta lambda = beta 5/6 > 1 - eps_gamma for beta > 1.2: most rows clamp
  int n_idle = 0, n_acting = 0;
  const double e_idle = rel_diff(rule_run<Falcon2Rule<P50>>(idle, s), falcon_reference(s, idle, true, n_idle));
  const double e_acting = rel_diff(rule_run<Falcon2Rule<P50>>(acting, s), falcon_reference(s, acting, true, n_acting));
  INFO("relative difference " << e_idle << " (clamp idle), " << e_acting << " (clamp acting on " << n_acting << " of " << 23 * 6 << ")");
  CHECK(n_idle == 0);
  CHECK(n_acting > 0);
  CHECK(e_idle <= 1e-45);
  CHECK(e_acting <= 1e-45);
}

TEST_CASE("FALCON-2A forward equals eq. (4.7)-(4.8) in mp50, clamp idle and acting", "[train][falcon]") {
  // If this fails, FALCON-2A reads a residual (it must be the additive write), its gain is not the one
  // logit's 2 sigmoid(g), or its decay is not the clamped 1 - eta lambda.
  const analysis::HeadStream s = analysis::chunk_test_stream(5, 19, 6);
  NlmsOptions idle, acting;
  acting.falcon.ridge = 5.0;
  int n_idle = 0, n_acting = 0;
  const double e_idle = rel_diff(rule_run<Falcon2aRule<P50>>(idle, s), falcon_reference(s, idle, false, n_idle));
  const double e_acting = rel_diff(rule_run<Falcon2aRule<P50>>(acting, s), falcon_reference(s, acting, false, n_acting));
  INFO("relative difference " << e_idle << " (clamp idle), " << e_acting << " (clamp acting on " << n_acting << ")");
  CHECK(n_acting > 0);
  CHECK(e_idle <= 1e-45);
  CHECK(e_acting <= 1e-45);
}

TEST_CASE("FALCON-2's clamped decay equals the paper's log-space reduction to the projector-only rule in mp50", "[train][falcon]") {
  // Seed 003 sec. 4.2, "exact column-wise reduction": with c_{t,j} = exp(sum_{s<=t} log gamma_{s,j}) and
  // s~_{t,j} = s_{t,j} / c_{t,j}, the implemented (clamped) recurrence is the projector-only one
  //   s~_{t,j} = (I - eta~ x x^T) s~_{t-1,j} + eta~ v~_{t,j} x,   eta~ = eta / gamma,   v~ = v / c_{t-1}.
  // Run here in that form, in log space, and compared with the rule. If this fails, the rule's decay is not
  // the gamma of the paper's kernels (the clamp or the ridge differ), so the chunked form the paper builds
  // on this identity would not compute this rule.
  const analysis::HeadStream s = analysis::chunk_test_stream(4, 29, 8);
  for (const double ridge : {0.01, 5.0}) {
    NlmsOptions opt;
    opt.falcon.ridge = ridge;
    const int d = s.d;
    const mp50 eps(opt.eps), alpha_max = mp50(1) - mp50(opt.falcon.eps_gamma);
    Mat<mp50> St = Mat<mp50>::Zero(d, d), O(s.T, d);  // S~ (d_x, d_v)
    Vec<mp50> zeta = Vec<mp50>::Zero(d);              // log c_{t,j}
    for (int t = 0; t < s.T; ++t) {
      const Vec<mp50> x = rms_norm_ref(column50(s.k, t), eps), qf = rms_norm_ref(column50(s.q, t), eps);
      const mp50 lambda = mp50(ridge) * x.dot(x);
      Vec<mp50> c(d);
      for (int j = 0; j < d; ++j) {
        const mp50 eta = 2 / (1 + exp(-mp50(s.gate(j, t)))) / (x.dot(x) + lambda + eps);
        const mp50 alpha = std::min(mp50(lambda * eta), alpha_max);
        const mp50 log_gamma = log(1 - alpha);
        const mp50 eta_t = eta / exp(log_gamma), v_t = mp50(s.v(j, t)) / exp(zeta(j));
        St.col(j) += eta_t * (v_t - x.dot(St.col(j))) * x;
        zeta(j) += log_gamma;
        c(j) = exp(zeta(j));
      }
      O.row(t) = (c.asDiagonal() * (St.transpose() * qf)).transpose();  // o_t = S_t^T qf, S_t = S~_t diag(c_t)
    }
    const double e = rel_diff(rule_run<Falcon2Rule<P50>>(opt, s), O);
    INFO("ridge " << ridge << ": relative difference " << e);
    CHECK(e <= 1e-45);
  }
}

TEST_CASE("FALCON-2 and FALCON-2A in every precision against mp100", "[train][falcon][precision]") {
  // The precision tests' shared case (tests/core/precision_case.hpp) and their tolerance.
  for (const std::string m : {"falcon2", "falcon2a"}) test::check_mixer_against_mp100(m);
}

TEST_CASE("FALCON-2 and FALCON-2A: layer gradcheck (double) and mixer gradcheck (mp50)", "[train][falcon]") {
  // dX and every weight of one mixer layer, the gate projection with its d_h (FALCON-2: one gain per value
  // channel) or 1 (FALCON-2A) rows per head included, against central differences, bound 10x the finite
  // difference's own error; in mp50 on the small shape. A larger ridge (0.5) weighs the decay's path
  // (gamma_j = 1 - eta_j lambda, lambda = ridge ||x||^2). If this fails, a term of the NLMS step's adjoint
  // is missing (the normaliser's dependence on ||x||^2, the RMSNorm Jacobian), or a gain's gradient goes
  // to another channel's logit.
  MixerConfig wide = mixer("falcon2");
  wide.falcon.ridge = 0.5;
  for (const MixerConfig& mc : {mixer("falcon2"), mixer("falcon2a"), wide}) {
    INFO(mc.mixer << " ridge " << mc.falcon.ridge);
    test::check_mixer_gradients(mc);
  }
}

TEST_CASE("FALCON-2 and FALCON-2A refuse what they cannot do, naming the parameter", "[train][falcon]") {
  // No CUDA kernel, no S renormalisation, knobs outside their range: each an error that names the flag
  // or the field, not a run of something else.
  for (const std::string m : {"falcon2", "falcon2a"}) {
    CHECK_THROWS_WITH(gpu_kernel_for(mixer(m), 32, GpuUse::Training), Catch::Contains("--mixer") && Catch::Contains(m));
    MixerConfig mc = mixer(m);
    mc.renormalise_S = true;
    mc.renorm_threshold = 10;
    CHECK_THROWS_WITH(with_rule<Precision<double>>(mc, [](const auto&) { return 0; }), Catch::Contains("--renormalise"));
  }
  NlmsOptions bad;
  bad.falcon.eps_gamma = 1.0;
  CHECK_THROWS_WITH(Falcon2Rule<Precision<double>>(bad), Catch::Contains("eps_gamma") && Catch::Contains("(0, 1)"));
  bad = NlmsOptions{};
  bad.falcon.ridge = -1;
  CHECK_THROWS_WITH(Falcon2aRule<Precision<double>>(bad), Catch::Contains("ridge") && Catch::Contains(">= 0"));
}

TEST_CASE("the ledger's NLMS measurements on known answers: descent inside (0, 2), exact scale invariance at eps = 0", "[train][falcon]") {
  // analysis/nlms_step.hpp, which decides falcon2-nlms-descent and falcon2-nlms-scale-invariance. If this
  // fails, the measurement itself is wrong (the loss or eq. 3.5's bound misread, the scaled run not the
  // rule's write), and the ledger's verdicts mean nothing.
  const auto d = analysis::nlms_descent<mp50>({1.0, 3.0}, {1, 4}, 10, 1);
  REQUIRE(d.size() == 2);
  CHECK(d[0].steps == 20);
  CHECK(d[0].ascents == 0);
  CHECK(d[0].max_ratio < 1);
  CHECK(d[0].max_excess <= 1e-40);  // eq. 3.5
  CHECK(d[1].ascents > 0);          // beta = 3: |1 - eta L| ~ 2 along x; every d = 1 step with ||x||^2 >> eps grows l
  CHECK(d[1].first_ascent.rfind("d = 1:", 0) == 0);
  const auto exact = analysis::nlms_scale_invariance<mp50>({1e-3, 1e3}, 0.0, 4, 16, 2);
  for (const auto& e : exact) {
    INFO("c = " << e.c << ": " << e.max_residual << ", " << e.max_state);
    CHECK(std::max(e.max_residual, e.max_state) <= 1e-40);
  }
  // eps > 0: each run's eta is off the exact one by ~eps / ((1 + ridge) ||x||^2), so the two runs part by
  // about that share at the smaller scale: O(1) at c = 1e-3 (||c x||^2 ~ 4e-6 against eps = 1e-4), the
  // unscaled run's ~eps / 4 per step at c = 1e3.
  const auto stab = analysis::nlms_scale_invariance<mp50>({1e-3, 1e3}, 1e-4, 4, 16, 2);
  INFO("eps = 1e-4: " << stab[0].max_residual << " at c = 1e-3, " << stab[1].max_residual << " at c = 1e3");
  CHECK(stab[0].max_residual > 1e-2);
  CHECK(stab[1].max_residual > 1e-6);
  CHECK(stab[1].max_residual < 1e-3);
}
