#pragma once
// Gradient checks: the hand-written backward against central finite differences,
// (L(theta + h e_i) - L(theta - h e_i)) / 2h for EVERY scalar of a tensor. check_tensor checks one
// tensor of any scalar function (the per-layer checks, tests/train/layer_gradcheck_test.cpp, use it
// directly); gradcheck() applies it to every parameter of the whole model (transformer.hpp), tiny.
//
// Error model. For a p-bit format with unit roundoff u, the central difference with step h has
// truncation error ~ h^2 |L'''| / 6 and rounding error ~ u |L| / h; h = u^(1/3) * max(1, |theta_i|)
// balances them. |L'''| is not known in advance (the unnormalised vla-v2 has far larger third
// derivatives than the others), so the truncation error is MEASURED per component by Richardson:
// fd(2h) - fd(h) = 3 c h^2 + O(h^4), i.e. trunc(h) ~ |fd(2h) - fd(h)| / 3. Per tensor:
//   rel_err = ||g_fd - g_bw||_2 / max(||g_fd||, ||g_bw||, 1e-3)
//   bound   = 10 * (||fd(2h) - fd(h)||_2 / 3 + sqrt(n) u |L| / h) / max(||g_fd||, ||g_bw||, 1e-3)
// i.e. the backward must agree with the finite difference to within 10x the finite difference's own
// error estimate. A wrong backward term gives an error of the size of the term (>= 1e-4 relative
// here), unrelated to h, and fails by orders of magnitude. In double the bounds come out ~1e-9..1e-7.
// Kinks (ELU at 0, the eps floors, the delta clamp) are measure-zero for random inputs and are not hit
// on the check problem (a kink inside [theta - 2h, theta + 2h] would show as one large component).
#include "core/model/transformer.hpp"

#include <random>

namespace vla::model {

struct TensorCheck {
  std::string name;
  std::size_t size = 0;
  double rel_err = 0.0;    // norm-wise relative error (above)
  double grad_norm = 0.0;  // ||g_bw||_2
  double bound = 0.0;      // the bound this tensor is held to
  bool pass() const { return rel_err <= bound; }
};

struct GradcheckProblem {
  ModelConfig cfg;
  std::vector<std::vector<int>> tokens, targets;  // (B, T)
};

// The tiny problem: d = 8, H = 2 (d_h = 4), FFN 16, vocab 16, L = 2, T = 6, two sequences, a target at
// every position: small enough for central differences over every scalar parameter.
inline GradcheckProblem tiny_problem(const MixerConfig& mixer, std::uint64_t seed) {
  GradcheckProblem pr;
  pr.cfg.vocab = 16; pr.cfg.d_model = 8; pr.cfg.heads = 2; pr.cfg.d_head = 4; pr.cfg.ffn = 16;
  pr.cfg.layers = 2; pr.cfg.max_len = 6; pr.cfg.mixer = mixer;
  std::mt19937_64 gen(seed);
  for (int b = 0; b < 2; ++b) {
    std::vector<int> tok(6), tgt(6);
    for (int t = 0; t < 6; ++t) { tok[t] = int(gen() % 16); tgt[t] = int(gen() % 16); }
    pr.tokens.push_back(tok);
    pr.targets.push_back(tgt);
  }
  return pr;
}

// Parameters for the check: the training initialisation, with every vector (biases, LayerNorm gains
// and shifts) moved off its 0 / 1 starting value so that no term of the backward is checked at a
// symmetric special point, and embeddings raised to 0.5 so that the head is not near-uniform.
template <class T> Params<T> check_params(const ModelConfig& cfg, std::uint64_t seed) {
  Params<double> p = init_params<double>(cfg, seed);
  std::mt19937_64 gen(seed + 7);
  std::normal_distribution<double> nd(0.0, 0.2);
  for (std::size_t i = 0; i < p.t.size(); ++i) {
    if (p.t[i].cols() == 1) for (Eigen::Index j = 0; j < p.t[i].size(); ++j) p.t[i](j) += nd(gen);
  }
  p.t[TOK] *= 25.0;
  p.t[POS] *= 25.0;
  return p.cast<T>();
}

// Random non-zero biases too, so that the agreement test checks the bias paths.
inline Params<double> check_params_for_agreement(const ModelConfig& cfg) { return check_params<double>(cfg, 17); }

template <class T> double problem_loss(const GradcheckProblem& pr, const Params<T>& p, Params<T>* g) {
  // Unscaled backward, then divided by 12 targets in T: a loss_scale of double(1/12) would carry
  // double's rounding (5.6e-17 relative) into an mp50 check.
  double loss = 0.0;
  for (std::size_t b = 0; b < pr.tokens.size(); ++b)
    loss += sequence_forward_backward<T>(pr.cfg, p, pr.tokens[b], pr.targets[b], 1.0, g).loss_sum / 12.0;
  if (g)
    for (auto& m : g->t) m /= T(12);
  return loss;
}

// The check of ONE tensor, shared by the whole-model check below and the per-layer checks
// (tests/train/layer_gradcheck_test.cpp): central differences at h and 2h for every component of x
// against g_bw, and the norm-wise relative error and measured bound described at the top of this file.
// x is the tensor the loss reads; it is perturbed in place, one component at a time, and restored
// exactly. loss() returns the scalar loss in T at the current x. loss_mag sets the rounding error of one
// loss evaluation, u max(1, loss_mag): |L| for a mean cross-entropy, sum |terms| for a sum of terms of
// either sign (whose value can cancel to far below its rounding error).
template <class T, class Loss>
TensorCheck check_tensor(std::string name, Mat<T>& x, const Mat<T>& g_bw, const Loss& loss, double loss_mag,
                         double bound_factor = 10.0) {
  using std::abs;
  using std::cbrt;
  using std::sqrt;
  const T u = T(unit_roundoff<T>());
  const T h0 = T(cbrt(u));
  T num = T(0), den_fd = T(0), den_bw = T(0), trunc = T(0), round = T(0);
  for (Eigen::Index j = 0; j < x.size(); ++j) {
    const T x0 = x(j);
    const T h = h0 * (abs(x0) > T(1) ? T(abs(x0)) : T(1));
    auto fd_at = [&](const T& step) {
      x(j) = x0 + step;
      const T lp = loss();
      x(j) = x0 - step;
      const T lm = loss();
      x(j) = x0;
      return T((lp - lm) / (T(2) * step));
    };
    const T fd = fd_at(h), fd2 = fd_at(T(2) * h);
    const T bw = g_bw(j);
    num += (fd - bw) * (fd - bw);
    den_fd += fd * fd;
    den_bw += bw * bw;
    trunc += (fd2 - fd) * (fd2 - fd) / T(9);
    const T r = u * T(std::max(1.0, loss_mag)) / h;
    round += r * r;
  }
  TensorCheck c;
  c.name = std::move(name);
  c.size = std::size_t(x.size());
  const double den = std::max(to_double(T(sqrt(den_fd))), to_double(T(sqrt(den_bw))));
  c.grad_norm = to_double(T(sqrt(den_bw)));
  // Gradients with norm below kGradFloor are compared absolutely (a tensor whose exact gradient is 0,
  // e.g. the softmax key bias, which shifts all logits of a query equally, has only rounding noise).
  const double kGradFloor = 1e-3;
  c.rel_err = to_double(T(sqrt(num))) / std::max(den, kGradFloor);
  c.bound = bound_factor * (to_double(T(sqrt(trunc))) + to_double(T(sqrt(round)))) / std::max(den, kGradFloor);
  return c;
}

template <class T> std::vector<TensorCheck> gradcheck(const GradcheckProblem& pr, std::uint64_t seed, double bound_factor = 10.0) {
  Params<T> p = check_params<T>(pr.cfg, seed);
  Params<T> g = p.zeros_like();
  // the loss in T (summed in T, not through double, so mp50 keeps its digits)
  auto loss_T = [&](const Params<T>& q) {
    T s = T(0);
    for (std::size_t b = 0; b < pr.tokens.size(); ++b) {
      sequence_forward_backward<T>(pr.cfg, q, pr.tokens[b], pr.targets[b], 1.0, nullptr, &s);
    }
    return s / T(12);
  };
  const double L0 = problem_loss<T>(pr, p, &g);
  Params<T> q = p;  // perturbed one component at a time by check_tensor, always restored
  std::vector<TensorCheck> out;
  for (std::size_t i = 0; i < p.t.size(); ++i) {
    if (p.t[i].size() == 0) continue;
    out.push_back(check_tensor<T>(p.names[i], q.t[i], g.t[i], [&] { return loss_T(q); }, std::abs(L0), bound_factor));
  }
  return out;
}

}  // namespace vla::model
