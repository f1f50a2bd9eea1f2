// The scalar-decay rules (core/rules/scalar_decay.hpp): RetNet (retnet/, seed 004 sec. 5.2, constant
// gamma) and Mamba-2 / SSD (mamba2/, sec. 5.3, gamma_t = sigmoid(g_t)), checked like the other rules:
// the forward against the seed's parallel form in mp50, every precision against mp100 on the precision
// tests' shared case, and the backward (the rule's adjoint through core/model/head.hpp) against central
// differences, per layer in double and in mp50.
#include "mixer_gradcheck.hpp"

#include "../core/precision_case.hpp"
#include "core/rules/gpu_support.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <random>

using namespace vla;

namespace {

MixerConfig mixer(const char* name) {
  MixerConfig mc;
  mc.mixer = name;
  return mc;
}

const char* const kScalarDecayMixers[] = {"retnet", "mamba2"};

// Runs `rule` (batch of B, d = 8, T = 16, mp50) on random q, k, v and gate logits, and compares every
// o_t and ||S_t||_F with the parallel form O = (L . Q K^T) V, L_ts = prod_{s < r <= t} gamma_r (s <= t),
// built entry by entry from gamma_of(g) of each token's gate logit g. Both are exact up to mp50
// rounding (2^-167 ~ 5e-51 per operation, ~T d operations per output): 1e-45 relative to max |o|
// leaves a 1e3 margin, and a wrong decay exponent, a decay applied at the wrong step, a missing term or
// a transposed S is O(1) off.
template <class Rule, class GammaOf> void check_parallel_form(const Rule& rule, GammaOf gamma_of, std::uint64_t seed) {
  const int T = 16, d = 8, B = 2;
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> n(0.0, 1.0);
  std::vector<Mat<mp50>> q(B, Mat<mp50>(d, T)), k = q, v = q;  // column t = token t
  std::vector<Vec<mp50>> g(B, Vec<mp50>(T));                     // gate logits
  for (int b = 0; b < B; ++b) {
    for (auto* m : {&q[b], &k[b], &v[b]})
      for (Eigen::Index i = 0; i < m->size(); ++i) (*m)(i) = mp50(n(gen));
    for (int t = 0; t < T; ++t) g[b](t) = mp50(2.0 * n(gen));
  }
  auto st = rule.init(B, d);
  HeadInputs<mp50> in;
  Mat<mp50> out;
  StepRecord<mp50> rec;
  mp50 err = 0, scale = 0, s_err = 0;
  for (int t = 0; t < T; ++t) {
    in.q.resize(d, B); in.k.resize(d, B); in.v.resize(d, B); in.gate.resize(1, B);
    for (int b = 0; b < B; ++b) { in.q.col(b) = q[b].col(t); in.k.col(b) = k[b].col(t); in.v.col(b) = v[b].col(t); in.gate(0, b) = g[b](t); }
    rule.step(st, in, out, &rec);
    for (int b = 0; b < B; ++b) {
      Vec<mp50> o = Vec<mp50>::Zero(d);
      Mat<mp50> S = Mat<mp50>::Zero(d, d);
      for (int s = 0; s <= t; ++s) {
        mp50 L = 1;
        for (int r = s + 1; r <= t; ++r) L *= gamma_of(g[b](r));
        o += L * k[b].col(s).dot(q[b].col(t)) * v[b].col(s);
        S += L * v[b].col(s) * k[b].col(s).transpose();
      }
      err = std::max(err, mp50((out.col(b) - o).cwiseAbs().maxCoeff()));
      scale = std::max(scale, mp50(o.cwiseAbs().maxCoeff()));
      s_err = std::max(s_err, mp50(abs(mp50(rec.stats[b].S_fro) - S.norm()) / S.norm()));
    }
  }
  INFO("max |o - parallel form| / max |o| = " << to_double(mp50(err / scale)));
  CHECK(scale > 1);
  CHECK(err <= mp50(1e-45) * scale);
  CHECK(s_err < 1e-15);  // ||S_t||_F reported (in double) from the same state
}

}  // namespace

TEST_CASE("retnet forward equals the seed's parallel form in mp50", "[train][retnet]") {
  // D_ts = gamma^(t-s): the default gamma and a strong decay; the gate logits are ignored.
  using P = Precision<mp50>;
  for (const double gamma : {RetNetOptions{}.gamma, 0.5}) {
    INFO("gamma " << gamma);
    check_parallel_form(RetNetRule<P>(RetNetOptions{gamma}), [&](const mp50&) { return mp50(gamma); }, 404);
  }
  CHECK_THROWS_WITH(RetNetRule<P>(RetNetOptions{1.0}), Catch::Contains("gamma"));
}

TEST_CASE("mamba2 forward equals the seed's parallel dual in mp50", "[train][mamba2]") {
  // L_ts = prod_{s < r <= t} sigmoid(g_r): the decay of token r applies to everything written before it.
  check_parallel_form(Mamba2Rule<Precision<mp50>>(), [](const mp50& g) { return mp50(1 / (1 + exp(-g))); }, 505);
}

TEST_CASE("scalar-decay rules in every precision against mp100", "[train][retnet][mamba2][precision]") {
  // The precision tests' shared case (tests/core/precision_case.hpp: a single-head layer, d = 8,
  // T = 16) and their tolerance from the storage format's unit roundoff; mp50 to double rounding.
  for (const std::string m : kScalarDecayMixers) test::check_mp50_rounds_to_double(m, test::check_mixer_against_mp100(m));
}

TEST_CASE("scalar-decay rules: layer gradcheck (double) and mixer gradcheck (mp50)", "[train][retnet][mamba2]") {
  // One mixer layer (tests/train/mixer_gradcheck.hpp): dX and every weight of the block (Mamba-2's gate
  // projection included) against central differences, bound 10x the finite difference's own measured
  // error; in double on the layer checks' shape, in mp50 on the small one (where a double constant in
  // the adjoint would show).
  for (const char* m : kScalarDecayMixers) {
    test::check_mixer_gradients(mixer(m));
  }
}

TEST_CASE("scalar-decay rules have no GPU kernel and say so", "[train][retnet][mamba2]") {
  for (const char* m : kScalarDecayMixers) {
    CHECK(gpu_kernel_of(mixer(m)).path == GpuPath::None);
    CHECK_THROWS_WITH(gpu_kernel_for(mixer(m), 32, GpuUse::Training),
                      Catch::Contains("--mixer") && Catch::Contains(std::string("'") + m + "'"));
  }
}
