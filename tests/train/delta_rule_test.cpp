// The classic delta rule (core/rules/delta/, seed 004 sec. 6.4, beta_t = 2 sigmoid(g_t) in (0, 2)),
// checked like the other rules: the forward against the update written out here in mp50, the
// contraction that makes (0, 2) the right range, every precision against mp100, and the backward (the
// shared delta-write adjoint through core/model/head.hpp) against central differences in double and mp50.
#include "mixer_gradcheck.hpp"

#include "../core/precision_case.hpp"
#include "core/rules/gpu_support.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <random>

using namespace vla;

namespace {
MixerConfig delta_mixer() {
  MixerConfig mc;
  mc.mixer = "delta";
  return mc;
}
}  // namespace

TEST_CASE("delta rule forward equals S_t = S_{t-1} + beta_t (v_t - S_{t-1} k_hat_t) k_hat_t^T in mp50", "[train][delta]") {
  // The update and the eq. (11) read written out here on the same inputs, batch 2, d = 6, T = 20. If
  // this fails the rule writes another update: beta applied to the state (that is DeltaNet), the gain
  // outside (0, 2), the raw key instead of unit(phi(k)), or the read before the write.
  using P = Precision<mp50>;
  const int T = 20, d = 6, B = 2;
  std::mt19937_64 gen(7);
  std::normal_distribution<double> n(0.0, 1.0);
  const DeltaRule<P> rule;
  auto st = rule.init(B, d);
  std::vector<Mat<mp50>> S(B, Mat<mp50>::Zero(d, d));
  std::vector<Vec<mp50>> z(B, Vec<mp50>::Zero(d));
  HeadInputs<mp50> in;
  Mat<mp50> out;
  mp50 worst = 0;
  for (int t = 0; t < T; ++t) {
    in.q.resize(d, B); in.k.resize(d, B); in.v.resize(d, B); in.gate.resize(1, B);
    for (auto* m : {&in.q, &in.k, &in.v})
      for (Eigen::Index i = 0; i < m->size(); ++i) (*m)(i) = mp50(n(gen));
    for (int b = 0; b < B; ++b) in.gate(0, b) = mp50(2.0 * n(gen));
    rule.step(st, in, out, nullptr);
    for (int b = 0; b < B; ++b) {
      const Vec<mp50> kf = elu_plus_one(Vec<mp50>(in.k.col(b))), qf = elu_plus_one(Vec<mp50>(in.q.col(b)));
      const Vec<mp50> k_hat = kf / mp50(kf.norm());
      const mp50 beta = 2 / (1 + exp(-in.gate(0, b)));
      S[b] = S[b] + beta * (Vec<mp50>(in.v.col(b)) - S[b] * k_hat) * k_hat.transpose();
      z[b] += kf;
      const Vec<mp50> o = S[b] * qf / mp50(qf.dot(z[b]));
      worst = std::max(worst, mp50((out.col(b) - o).cwiseAbs().maxCoeff() / o.cwiseAbs().maxCoeff()));
    }
  }
  INFO("max relative difference " << to_double(worst));
  CHECK(worst <= mp50(1e-45));
}

TEST_CASE("delta rule: the residual on the written key contracts by |1 - beta| < 1", "[train][delta]") {
  // After a write, S_t k_hat = S_{t-1} k_hat + beta e, so the new residual is e' = v - S_t k_hat =
  // (1 - beta) e: a contraction exactly for beta in (0, 2) (seed 003 eq. 3.4, the NLMS gain on unit
  // keys). Measured in mp50 over random states and logits, including |g| = 8 (beta near 0 and 2).
  // If this fails, the step is not the delta rule's gradient step, or beta leaves (0, 2).
  using P = Precision<mp50>;
  const int d = 5;
  std::mt19937_64 gen(9);
  std::normal_distribution<double> n(0.0, 1.0);
  const DeltaRule<P> rule;
  mp50 worst = 0, max_ratio = 0;
  for (int trial = 0; trial < 40; ++trial) {
    auto st = rule.init(1, d);
    HeadInputs<mp50> in;
    Mat<mp50> out;
    in.q = Mat<mp50>::Zero(d, 1); in.k.resize(d, 1); in.v.resize(d, 1); in.gate.resize(1, 1);
    for (int warm = 0; warm < 3; ++warm) {  // a non-empty memory first
      for (int i = 0; i < d; ++i) { in.k(i) = mp50(n(gen)); in.v(i) = mp50(n(gen)); }
      in.gate(0, 0) = mp50(n(gen));
      rule.step(st, in, out, nullptr);
    }
    for (int i = 0; i < d; ++i) { in.k(i) = mp50(n(gen)); in.v(i) = mp50(n(gen)); }
    in.gate(0, 0) = trial % 4 == 0 ? mp50(8) : trial % 4 == 1 ? mp50(-8) : mp50(2 * n(gen));
    const Vec<mp50> kf = elu_plus_one(Vec<mp50>(in.k.col(0)));
    const Vec<mp50> k_hat = kf / mp50(kf.norm());
    const Vec<mp50> e = Vec<mp50>(in.v.col(0)) - Mat<mp50>(st.memory.S(0)) * k_hat;
    rule.step(st, in, out, nullptr);
    const Vec<mp50> e_after = Vec<mp50>(in.v.col(0)) - Mat<mp50>(st.memory.S(0)) * k_hat;
    const mp50 beta = DeltaRule<P>::gain(in.gate(0, 0));
    CHECK(beta > 0);
    CHECK(beta < 2);
    const mp50 ratio = e_after.norm() / e.norm();
    worst = std::max(worst, mp50(abs(ratio - abs(1 - beta))));
    max_ratio = std::max(max_ratio, ratio);
  }
  INFO("max | ||e'|| / ||e|| - |1 - beta| | = " << to_double(worst) << ", max ratio " << to_double(max_ratio));
  CHECK(worst <= mp50(1e-45));
  CHECK(max_ratio < 1);
}

TEST_CASE("delta rule in every precision against mp100", "[train][delta][precision]") {
  // The precision tests' shared case (tests/core/precision_case.hpp) and their tolerance.
  test::check_mp50_rounds_to_double("delta", test::check_mixer_against_mp100("delta"));
}

TEST_CASE("delta rule: layer gradcheck (double) and mixer gradcheck (mp50)", "[train][delta]") {
  // dX and every weight of one mixer layer (the gate projection that makes beta included) against
  // central differences, bound 10x the finite difference's own error; in mp50 on the small shape.
  test::check_mixer_gradients(delta_mixer());
}

TEST_CASE("delta rule has no GPU kernel and says so", "[train][delta]") {
  CHECK_THROWS_WITH(gpu_kernel_for(delta_mixer(), 32, GpuUse::Training), Catch::Contains("--mixer") && Catch::Contains("delta"));
}
