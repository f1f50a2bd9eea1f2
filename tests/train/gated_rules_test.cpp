// Gated DeltaNet (core/rules/gated_deltanet/) and GLA (core/rules/gla/), the family's gated rules with
// more than one gate logit per head, checked like the other rules: the forward against the recurrence
// written out here from its seed definition in mp50, every precision against mp100, the backward (with
// its two or d_h gate logits) against central differences in double and mp50. Their chunkwise forms are
// checked in tests/core/chunked_forms.cpp.
#include "mixer_gradcheck.hpp"

#include "../core/precision_case.hpp"
#include "analysis/chunked_exactness.hpp"
#include "core/rules/gpu_support.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <string>

using namespace vla;

namespace {
MixerConfig mixer(const std::string& name) {
  MixerConfig mc;
  mc.mixer = name;
  return mc;
}
}  // namespace

TEST_CASE("GLA forward equals the seed's S_t = (alpha_t 1^T) . S_{t-1} + k_t^T v_t, o_t = q_t S_t, in mp50", "[train][gla]") {
  // Written in the seed's row-vector form (S (d_k, d_v), rows indexed by key channels), independent of the
  // rule's (d_v, d_k) storage. If this fails, the decay acts on the value channels instead of the key
  // channels, the gate is not sigmoid(g_t) per channel, or the read comes before the write.
  const analysis::HeadStream s = analysis::chunk_test_stream(6, 23, 4);
  const Mat<mp50> O = analysis::recurrent_outputs<mp50>("gla", s);
  Mat<mp50> S = Mat<mp50>::Zero(6, 6), ref(s.T, 6);
  for (int t = 0; t < s.T; ++t) {
    const Vec<mp50> q = cast_vector<mp50>(Vec<double>(s.q.col(t))), k = cast_vector<mp50>(Vec<double>(s.k.col(t))),
                    v = cast_vector<mp50>(Vec<double>(s.v.col(t)));
    for (int i = 0; i < 6; ++i) S.row(i) *= sigmoid(mp50(s.gate(i, t)));  // (alpha_t 1^T) . S
    S += k * v.transpose();                                                 // k_t^T v_t
    ref.row(t) = q.transpose() * S;                                         // q_t S_t
  }
  CHECK(to_double(mp50((O - ref).norm() / ref.norm())) <= 1e-45);
}

TEST_CASE("Gated DeltaNet forward equals S_t = alpha_t S_{t-1} (I - beta_t k_hat k_hat^T) + beta_t v_t k_hat^T in mp50", "[train][gated-deltanet]") {
  // The product form of the definition, with the eq. (11) read, written out here. If this fails, the
  // residual does not read the decayed state (a = c = alpha), the gates are swapped, or beta scales the
  // decay instead of the write.
  const int d = 5;
  const analysis::HeadStream s = analysis::chunk_test_stream(d, 19, 6);
  const Mat<mp50> O = analysis::recurrent_outputs<mp50>("gated-deltanet", s);
  Mat<mp50> S = Mat<mp50>::Zero(d, d), ref(s.T, d);
  Vec<mp50> z = Vec<mp50>::Zero(d);
  const mp50 eps(FastWeightOptions{}.eps);
  for (int t = 0; t < s.T; ++t) {
    const Vec<mp50> k_feat = elu_plus_one(cast_vector<mp50>(Vec<double>(s.k.col(t))));
    const Vec<mp50> k_hat = k_feat / mp50(k_feat.norm()), v = cast_vector<mp50>(Vec<double>(s.v.col(t)));
    const Vec<mp50> q_feat = elu_plus_one(cast_vector<mp50>(Vec<double>(s.q.col(t))));
    const mp50 alpha = sigmoid(mp50(s.gate(0, t))), beta = sigmoid(mp50(s.gate(1, t)));
    S = alpha * S * (Mat<mp50>::Identity(d, d) - beta * k_hat * k_hat.transpose()) + beta * v * k_hat.transpose();
    z += k_feat;
    const mp50 den = q_feat.dot(z);
    ref.row(t) = (S * q_feat).transpose() / (den < eps ? eps : den);
  }
  CHECK(to_double(mp50((O - ref).norm() / ref.norm())) <= 1e-45);
}

TEST_CASE("Gated DeltaNet and GLA in every precision against mp100", "[train][gated-deltanet][gla][precision]") {
  // The precision tests' shared case (tests/core/precision_case.hpp) and their tolerance.
  for (const std::string m : {"gated-deltanet", "gla"}) test::check_mixer_against_mp100(m);
}

TEST_CASE("Gated DeltaNet and GLA: layer gradcheck (double) and mixer gradcheck (mp50)", "[train][gated-deltanet][gla]") {
  // dX and every weight of one mixer layer, the gate projection with its 2 (alpha, beta) or d_h (one per
  // key channel) rows per head included, against central differences, bound 10x the finite difference's
  // own error; in mp50 on the small shape. If this fails, a gate's gradient goes to the wrong logit row
  // (the mixer's dG columns per head), or an adjoint term is missing (dc: the residual reads alpha S).
  for (const std::string m : {"gated-deltanet", "gla"}) {
    test::check_mixer_gradients(mixer(m));
  }
}

TEST_CASE("Gated DeltaNet and GLA have no GPU kernel and say so", "[train][gated-deltanet][gla]") {
  for (const std::string m : {"gated-deltanet", "gla"})
    CHECK_THROWS_WITH(gpu_kernel_for(mixer(m), 32, GpuUse::Training), Catch::Contains("--mixer") && Catch::Contains(m));
}
