// Per-LAYER gradient checks in double: each layer's hand-written backward (core/model/*.hpp) on its
// own, with a random input AND a random upstream gradient R, against central finite differences of
// L = <R, layer(x)> (so dL/dy = R exactly). Both the input gradient and every parameter gradient are
// checked, each by core/model/gradcheck.hpp's check_tensor: norm-wise relative error against 10x the
// finite difference's own measured error (Richardson truncation + rounding), ~1e-10..1e-8 in double.
// The whole-model check (gradcheck_test.cpp) says THAT the model's gradient is right; these say WHICH
// layer is wrong when it is not. A failure names the layer and the tensor whose backward formula is wrong.
#include "mixer_gradcheck.hpp"

#include <catch2/catch.hpp>

#include <random>

using namespace vla;
using namespace vla::model;

namespace {

using M = Mat<double>;

M gaussian(std::mt19937_64& gen, int rows, int cols, double mean = 0.0, double sd = 1.0) {
  std::normal_distribution<double> nd(mean, sd);
  M m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m(i) = nd(gen);
  return m;
}

double dot(const M& R, const M& Y) { return (R.array() * Y.array()).sum(); }
double mag(const M& R, const M& Y) { return (R.array() * Y.array()).abs().sum(); }  // rounding scale of dot()

// Every checked tensor has a gradient of size ~1 on these problems, so a backward that returns zeros
// (a term forgotten entirely) cannot pass on a zero finite difference either.
void expect_pass(const std::string& layer, const TensorCheck& c) {
  INFO(layer << " " << c.name << ": rel_err " << c.rel_err << " bound " << c.bound << " |g| " << c.grad_norm);
  CHECK(c.grad_norm > 1e-3);
  CHECK(c.pass());
}

}  // namespace

TEST_CASE("layer gradcheck: linear (with and without bias)", "[train]") {
  // Y = X W^T + b (linear.hpp). A failure means dX, dW or db of the affine map is wrong (a transpose,
  // a missing bias column sum); every projection, the FFN and the u map are built on it.
  std::mt19937_64 gen(1);
  for (const bool bias : {true, false}) {
    M X = gaussian(gen, 5, 6), W = gaussian(gen, 4, 6), b = bias ? gaussian(gen, 4, 1) : M();
    const M R = gaussian(gen, 5, 4);
    M dW = M::Zero(4, 6), db = M::Zero(b.rows(), b.cols());
    const M dX = linear_backward(R, X, W, dW, db);
    auto loss = [&] { return dot(R, linear_forward(X, W, b)); };
    const double m = mag(R, linear_forward(X, W, b));
    expect_pass("linear", check_tensor<double>("X", X, dX, loss, m));
    expect_pass("linear", check_tensor<double>("W", W, dW, loss, m));
    if (bias) expect_pass("linear", check_tensor<double>("b", b, db, loss, m));
    if (!bias) continue;
    // The check is sharp: the same tensor with one component off by 1e-6 of the gradient's norm fails
    // (the bound is ~1e-9 here). A failure means the bound is too loose to catch a wrong small term.
    M dW_bad = dW;
    dW_bad(0) += 1e-6 * dW.norm();
    const auto bad = check_tensor<double>("W (perturbed)", W, dW_bad, loss, m);
    INFO("perturbed: rel_err " << bad.rel_err << " bound " << bad.bound);
    CHECK_FALSE(bad.pass());
  }
}

TEST_CASE("layer gradcheck: layernorm", "[train]") {
  // y = g (x - mean) rstd + b (layernorm.hpp), input with a non-zero mean and spread. A failure means
  // the LayerNorm backward is wrong: the mean / variance terms of dX, or dg, db.
  std::mt19937_64 gen(2);
  M X = gaussian(gen, 5, 7, 0.7, 1.5), g = gaussian(gen, 7, 1, 1.0, 0.3), b = gaussian(gen, 7, 1, 0.0, 0.3);
  const M R = gaussian(gen, 5, 7);
  LayerNormCache<double> c;
  layernorm_forward(X, g, b, c);
  M dg = M::Zero(7, 1), db = M::Zero(7, 1);
  const M dX = layernorm_backward(R, g, c, dg, db);
  auto loss = [&] { LayerNormCache<double> cc; return dot(R, layernorm_forward(X, g, b, cc)); };
  LayerNormCache<double> cm;
  const double m = mag(R, layernorm_forward(X, g, b, cm));
  expect_pass("layernorm", check_tensor<double>("X", X, dX, loss, m));
  expect_pass("layernorm", check_tensor<double>("g", g, dg, loss, m));
  expect_pass("layernorm", check_tensor<double>("b", b, db, loss, m));
}

TEST_CASE("layer gradcheck: gelu", "[train]") {
  // gelu(z), tanh form (gelu.hpp), inputs N(0, 2^2) so the curved region and both tails are covered.
  // A failure means gelu_grad is not the derivative of gelu.
  std::mt19937_64 gen(3);
  M Z = gaussian(gen, 5, 8, 0.0, 2.0);
  const M R = gaussian(gen, 5, 8);
  const M dZ = gelu_backward(R, Z);
  auto loss = [&] { return dot(R, gelu_forward(Z)); };
  expect_pass("gelu", check_tensor<double>("Z", Z, dZ, loss, mag(R, gelu_forward(Z))));
}

TEST_CASE("layer gradcheck: FFN block with its residual", "[train]") {
  // Y = X + W2 gelu(W1 LN2(X) + b1) + b2: the block composed from the layer functions in the order of
  // transformer.hpp (forward: layernorm, linear, gelu, linear, residual add; backward the reverse,
  // the residual passing R straight to dX). A failure with the three layer checks above passing means
  // the composition is wrong (gelu_backward fed the output instead of Z1, the residual dropped).
  std::mt19937_64 gen(4);
  const int T = 4, d = 5, F = 7;
  M X = gaussian(gen, T, d), lg = gaussian(gen, d, 1, 1.0, 0.3), lb = gaussian(gen, d, 1, 0.0, 0.3);
  M W1 = gaussian(gen, F, d, 0.0, 1 / std::sqrt(double(d))), b1 = gaussian(gen, F, 1, 0.0, 0.3);
  M W2 = gaussian(gen, d, F, 0.0, 1 / std::sqrt(double(F))), b2 = gaussian(gen, d, 1, 0.0, 0.3);
  const M R = gaussian(gen, T, d);
  struct Fwd { LayerNormCache<double> ln; M H2, Z1, A1, Y; };
  auto forward = [&] {
    Fwd f;
    f.H2 = layernorm_forward(X, lg, lb, f.ln);
    f.Z1 = linear_forward(f.H2, W1, b1);
    f.A1 = gelu_forward(f.Z1);
    f.Y = X + linear_forward(f.A1, W2, b2);
    return f;
  };
  const Fwd f = forward();
  M dlg = M::Zero(d, 1), dlb = M::Zero(d, 1), dW1 = M::Zero(F, d), db1 = M::Zero(F, 1), dW2 = M::Zero(d, F), db2 = M::Zero(d, 1);
  const M dA1 = linear_backward(R, f.A1, W2, dW2, db2);
  const M dH2 = linear_backward(gelu_backward(dA1, f.Z1), f.H2, W1, dW1, db1);
  const M dX = R + layernorm_backward(dH2, lg, f.ln, dlg, dlb);
  auto loss = [&] { return dot(R, forward().Y); };
  const double m = mag(R, f.Y);
  expect_pass("ffn", check_tensor<double>("X", X, dX, loss, m));
  expect_pass("ffn", check_tensor<double>("ln2.g", lg, dlg, loss, m));
  expect_pass("ffn", check_tensor<double>("ln2.b", lb, dlb, loss, m));
  expect_pass("ffn", check_tensor<double>("W1", W1, dW1, loss, m));
  expect_pass("ffn", check_tensor<double>("b1", b1, db1, loss, m));
  expect_pass("ffn", check_tensor<double>("W2", W2, dW2, loss, m));
  expect_pass("ffn", check_tensor<double>("b2", b2, db2, loss, m));
}

TEST_CASE("layer gradcheck: embeddings, final LayerNorm, tied head and cross-entropy", "[train]") {
  // The model with ZERO blocks (transformer.hpp with layers = 0):
  //   L = scale * sum_{t: target_t >= 0} CE(LNf(E[tok_t] + P_t) E^T, target_t),
  // tokens with repeats (gradient rows accumulate), some positions without a target, and a random
  // scale standing in for the upstream gradient of the loss. E is both the input embedding and the
  // head, so its gradient is the sum of both paths. A failure means the cross-entropy gradient
  // (softmax - one-hot, the target mask, the scale), the tied head's dE, or the embedding scatter is wrong.
  ModelConfig cfg;
  cfg.vocab = 11; cfg.d_model = 6; cfg.heads = 1; cfg.d_head = 6; cfg.ffn = 4; cfg.layers = 0; cfg.max_len = 7;
  cfg.mixer.mixer = "linear";  // unused: no blocks
  Params<double> p = check_params<double>(cfg, 9);  // embeddings N(0, 0.5^2), LNf gain and shift off 1 / 0
  const std::vector<int> tok{3, 7, 3, 0, 10, 7, 3}, tgt{5, -1, 2, 9, -1, 3, 3};
  const double scale = 0.37;
  Params<double> g = p.zeros_like();
  const double L0 = scale * sequence_forward_backward<double>(cfg, p, tok, tgt, scale, &g).loss_sum;
  auto loss = [&] {
    double s = 0.0;
    sequence_forward_backward<double>(cfg, p, tok, tgt, scale, nullptr, &s);
    return scale * s;
  };
  for (std::size_t i = 0; i < p.t.size(); ++i) expect_pass("embedding+head+CE", check_tensor<double>(p.names[i], p.t[i], g.t[i], loss, std::abs(L0)));
}

namespace {

void check_mixer_layer(const MixerConfig& mc, const std::string& label) {
  for (const auto& c : test::mixer_gradcheck<double>(mc, test::MixerShape{}, 21)) {
    INFO(label << " " << c.name << ": rel_err " << c.rel_err << " bound " << c.bound << " |g| " << c.grad_norm);
    if (test::zero_by_design(mc, c.name)) CHECK(c.grad_norm < 1e-12);
    else CHECK(c.grad_norm > 1e-3);
    CHECK(c.pass());
  }
}

MixerConfig mixer(const std::string& name) {
  MixerConfig mc;
  mc.mixer = name;
  return mc;
}

}  // namespace

TEST_CASE("layer gradcheck: mixer layer of every rule (double)", "[train]") {
  // One mixer layer on its own (mixer.hpp; test::mixer_gradcheck): d = 8, H = 2, d_h = 4, T = 6, random
  // X and upstream R; checks dX and every weight of the block. A failure names the rule and the tensor:
  // Wq/bq the read backward (eq. 11), Wk/bk the key path (feature map, unit(), the write), Wv/bv the
  // write's residual, Wu/bu the A-loop (Alg. 1 lines 10-17), Wg/bg the DeltaNet gate, Wo/bo the output
  // projection; for softmax, core/rules/softmax/adjoint.hpp.
  for (const char* m : {"vla", "vla-v2", "vla-rls", "vla-fixed-a", "vla-no-knorm", "deltanet", "linear", "softmax"})
    check_mixer_layer(mixer(m), std::string("mixer ") + m);
  // The refresh A += eta I (Alg. 1 line 16; period 20 by default, never reached at T = 6) at every 2nd
  // step: it adds a constant, so the gradient must pass through it unchanged.
  MixerConfig refresh = mixer("vla");
  refresh.penalty.refresh_period = 2;
  refresh.penalty.refresh_eta = 0.1;
  check_mixer_layer(refresh, "vla (refresh every 2 steps)");
  // vla-v2 (no key normalisation, raw gain) at the default A_0 = 10 I: alpha . k_hat ~ 10 |k_feat|^2 >> 1,
  // so S grows by that factor per step and the outputs reach ~1e8 at T = 6. The check above still
  // holds, but the finite difference of the small-gradient tensors (b_o) is then resolved only to ~1e-3
  // of the loss's rounding. With A_0 = 0.1 I (lambda0 = 10) the same rule stays O(1) and is held to ~1e-9.
  MixerConfig tame = mixer("vla-v2");
  tame.penalty.lambda0 = 10.0;
  check_mixer_layer(tame, "vla-v2 (lambda0 = 10)");
  // DeltaNet without its gate (beta = 1): the ungated branch of the backward.
  MixerConfig ungated = mixer("deltanet");
  ungated.deltanet_gated = false;
  check_mixer_layer(ungated, "deltanet (ungated)");
}
