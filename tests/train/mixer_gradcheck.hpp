#pragma once
// The gradient check of ONE mixer layer on its own (core/model/mixer.hpp: projections, the rule's
// recurrence or softmax attention per head, output projection), templated on the scalar so that the
// same problem runs in double (layer_gradcheck_test.cpp) and in mp50 (mixer_gradcheck_mp50_test.cpp).
//
// Problem: a random input X (T, d) and a random upstream gradient R (T, d), both N(0, 1); the scalar
//   L = <R, Mixer(X)> = sum_ij R_ij Y_ij
// has dL/dY = R, so mixer_backward(..., dY = R) must return dL/dX and dL/dW for every weight of the
// block. Each of X and the block's tensors is checked by core/model/gradcheck.hpp's check_tensor
// (central differences, bound = 10x the finite difference's own measured error). The rounding scale
// of one evaluation of L is sum_ij |R_ij Y_ij| (a sum of terms of either sign).
#include "core/model/gradcheck.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <string>

namespace vla::test {

struct MixerShape {
  int d_model = 8, heads = 2, d_head = 4, T = 6;
};

// The block tensors a mixer layer owns (the empty ones of a mixer that has no W_u / w_g are skipped).
inline constexpr model::BlockTensor kMixerTensors[] = {model::WQ, model::BQ, model::WK, model::BK, model::WV, model::BV,
                                                       model::WU, model::BU, model::WG, model::BG, model::WO, model::BO};

// Tensors whose exact gradient is 0 by the mathematics: the softmax key bias (q . (k_s + b) shifts every
// logit of query t by q . b, which the softmax removes), W_u, b_u of vla-fixed-a (A_t = A_0: u is never
// read), w_g, b_g of the ungated DeltaNet (beta = 1: the gate is never read) and W_k, b_k of MetaLA (its
// key is tied to the gate, 1 - alpha_t: the layer's key is never read). They are compared absolutely
// (check_tensor's floor) and must come out ~0.
inline bool zero_by_design(const MixerConfig& mc, const std::string& name) {
  return (mc.mixer == "softmax" && name.ends_with(".bk")) ||
         (mc.mixer == "vla-fixed-a" && (name.ends_with(".Wu") || name.ends_with(".bu"))) ||
         (mc.mixer == "deltanet" && !mc.deltanet_gated && (name.ends_with(".Wg") || name.ends_with(".bg"))) ||
         (mc.mixer == "metala" && (name.ends_with(".Wk") || name.ends_with(".bk")));
}

template <class T>
std::vector<model::TensorCheck> mixer_gradcheck(const MixerConfig& mc, const MixerShape& s, std::uint64_t seed) {
  model::ModelConfig cfg;
  cfg.vocab = 4; cfg.d_model = s.d_model; cfg.heads = s.heads; cfg.d_head = s.d_head; cfg.ffn = 4; cfg.layers = 1;
  cfg.max_len = s.T; cfg.mixer = mc;
  // The training initialisation with every bias moved off 0 (gradcheck.hpp), so the bias paths are checked.
  model::Params<T> p = model::check_params<T>(cfg, seed);
  std::mt19937_64 gen(seed + 101);
  std::normal_distribution<double> nd(0.0, 1.0);
  auto gauss = [&](int r, int c) {
    Mat<double> m(r, c);
    for (Eigen::Index i = 0; i < m.size(); ++i) m(i) = nd(gen);
    return cast_matrix<T>(m);
  };
  Mat<T> X = gauss(s.T, s.d_model);        // (T, d) random input
  const Mat<T> R = gauss(s.T, s.d_model);  // (T, d) random upstream gradient dL/dY
  return with_rule<Precision<T>>(mc, [&](const auto& rule) {
    using Rule = std::decay_t<decltype(rule)>;
    const int H = s.heads, dh = s.d_head;
    auto loss = [&] {
      model::MixerCache<Rule> c;
      const Mat<T> Y = model::mixer_forward<T>(rule, p, 0, H, dh, X, c, mc.next_latent);
      return T((R.array() * Y.array()).sum());
    };
    model::MixerCache<Rule> cache;
    const Mat<T> Y = model::mixer_forward<T>(rule, p, 0, H, dh, X, cache, mc.next_latent);
    const double mag = to_double(T((R.array() * Y.array()).abs().sum()));
    model::Params<T> g = p.zeros_like();
    const Mat<T> dX = model::mixer_backward<T>(rule, p, g, 0, H, dh, cache, R);
    std::vector<model::TensorCheck> out;
    out.push_back(model::check_tensor<T>("X", X, dX, loss, mag));
    for (const auto k : kMixerTensors) {
      const int i = p.block(0, k);
      if (p.t[i].size() == 0) continue;
      out.push_back(model::check_tensor<T>(p.names[i], p.t[i], g.t[i], loss, mag));
    }
    return out;
  });
}

// Instantiated once, in mixer_gradcheck.cpp: each instance compiles every rule's forward and backward
// (with_rule), which the test files that call it would otherwise each compile again.
extern template std::vector<model::TensorCheck> mixer_gradcheck<double>(const MixerConfig&, const MixerShape&, std::uint64_t);
extern template std::vector<model::TensorCheck> mixer_gradcheck<mp50>(const MixerConfig&, const MixerShape&, std::uint64_t);

// The rules' gradient test: the layer check in double on the default shape (seed 21), then the mixer
// check in mp50 on the small one (seed 31, where a double constant in an adjoint would show): every
// tensor nonzero (zero_by_design ones ~0) and within its bound, and the mp50 worst error far below
// double's ~1e-10.
inline void check_mixer_gradients(const MixerConfig& mc) {
  for (const auto& c : mixer_gradcheck<double>(mc, MixerShape{}, 21)) {
    INFO(mc.mixer << " " << c.name << ": rel_err " << c.rel_err << " bound " << c.bound << " |g| " << c.grad_norm);
    if (zero_by_design(mc, c.name)) CHECK(c.grad_norm < 1e-12);
    else CHECK(c.grad_norm > 1e-3);
    CHECK(c.pass());
  }
  double worst = 0.0;
  for (const auto& c : mixer_gradcheck<mp50>(mc, MixerShape{4, 2, 3, 5}, 31)) {
    INFO(mc.mixer << " (mp50) " << c.name << ": rel_err " << c.rel_err << " bound " << c.bound << " |g| " << c.grad_norm);
    if (zero_by_design(mc, c.name)) CHECK(c.grad_norm < 1e-40);
    else CHECK(c.grad_norm > 1e-3);
    CHECK(c.pass());
    if (!zero_by_design(mc, c.name)) worst = std::max(worst, c.rel_err);
  }
  INFO(mc.mixer << " (mp50) worst relative error " << worst);
  CHECK(worst < 1e-25);  // double's accuracy would be ~1e-10: the check really ran in mp50
}

}  // namespace vla::test
