#pragma once
// Remark 1: with A_t fixed at lambda0^-1 I (vla-fixed-a), alpha_hat = k_hat, and when e_t = v_t (no prior
// association read back) the update is S_t = S_{t-1} + v_t k_hat^T, linear attention with normalised
// keys (linear-normalised). Measured in double:
//   max_alpha_dev     max over t of ||alpha_hat_t - k_hat_t||_inf on the Sec. 6.2 random protocol
//   S_dev_orthonormal ||S^fixed_n - S^lin_n||_F / ||S^lin_n||_F after n = d orthonormal keys (e_t = v_t exactly)
//   S_dev_random      the same after T random tokens (e_t != v_t: the condition of the remark fails)
#include "core/rules/registry.hpp"

namespace vla::analysis {

struct ReductionResult {
  double max_alpha_dev = 0, S_dev_orthonormal = 0, S_dev_random = 0;
};

ReductionResult remark1_reduction(int d, int T, std::uint64_t seed, const MixerConfig& cfg);

}  // namespace vla::analysis
