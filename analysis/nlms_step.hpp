#pragma once
// Seed 003's two statements about the NLMS step of FALCON-2 (core/rules/nlms_memory.hpp: the rule's own
// write, nlms_write, on the write feature x), measured in any scalar (double, mp50):
//
// Per-step descent (Lemma 3.1 with eq. 3.4, column-wise for eq. 4.4): with L = ||x||^2 + lambda the
// smoothness of l(S) = 1/2 ||S x - y||^2 + lambda/2 ||S||_F^2 (lambda = ridge ||x||^2, S (d_v, d_k)), a
// gain beta in (0, 2) makes eta = beta / (L + eps) < 2 / L, so that
//   l(S_t) <= l(S_{t-1}) - sum_j eta_j (2 - eta_j L) / 2 ||grad_j||^2   (eq. 3.5, grad_j row j of the gradient)
// Outside (0, 2) the step overshoots along x (the eigenvalue 1 - eta L of the transition < -1) and the loss
// can grow: the counterexample side.
//
// Scale invariance (sec. 4.1, "Scaled DeltaNet"): with eps = 0 and the scaled ridge, x_t -> c x_t at every
// step leaves the decay gamma_t and the projector eta_t x_t x_t^T unchanged, so the state becomes S_t / c
// and every residual r_t = v_t - S_{t-1} x_t is unchanged; with eps > 0 only approximately (eps << ||x||^2).
#include <cstdint>
#include <string>
#include <vector>

namespace vla::analysis {

struct NlmsDescent {
  double beta = 0;           // the gain of every row
  int steps = 0;             // random (S_{t-1}, x, y) tried, over the dimensions
  int ascents = 0;           // steps with l(S_t) > l(S_{t-1})
  double max_ratio = 0;      // max l(S_t) / l(S_{t-1})
  double max_excess = 0;     // max [l(S_t) - l(S_{t-1}) + sum_j eta_j (2 - eta_j L)/2 ||grad_j||^2] / l(S_{t-1}): <= 0 by eq. 3.5
  std::string first_ascent;  // the first step that ascended, smallest dimension first: its d, S, x, y, the losses
};

// For each beta: `trials` random steps at each d in dims (S_{t-1}, y ~ N(0, 1), x ~ N(0, 1) scaled by
// 10^U(-2, 2): the step is meant to be scale-robust), the rule's default ridge, eps_gamma and eps. T: double or mp50.
template <class T>
std::vector<NlmsDescent> nlms_descent(const std::vector<double>& betas, const std::vector<int>& dims, int trials, std::uint64_t seed);

struct NlmsScaleInvariance {
  double c = 0;              // the scale of every write feature
  double eps = 0;            // eq. 3.4's stabiliser
  double max_residual = 0;   // max_t ||r'_t - r_t|| / ||r_t||
  double max_state = 0;      // max_t ||c S'_t - S_t||_F / ||S_t||_F
};

// One sequence of T steps of d x d FALCON-2 from S_0 = 0 (x_t, v_t ~ N(0, 1), per-row gains 2 sigmoid(N(0, 1)),
// the default ridge), run on x_t and on c x_t for each c, with stabiliser eps. T: double or mp50.
template <class T>
std::vector<NlmsScaleInvariance> nlms_scale_invariance(const std::vector<double>& scales, double eps, int d, int steps,
                                                       std::uint64_t seed);

}  // namespace vla::analysis
