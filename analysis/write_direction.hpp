#pragma once
// Sec. 7.2: for two correlated unit keys k_1, k_2 (k_1 . k_2 = rho), the write direction of the second
// token should be orthogonal to k_1 ("A_1 k_2 ∝ k_2 - rho k_1"). Measured generically from the rules'
// WriteRecord: r = |k_1 . w_hat_2| / |k_1 . k_hat_2|, the fraction of the keys' correlation that
// survives in the write direction (0: orthogonal, as claimed; 1: no decorrelation at all, as a plain
// delta rule writing along k_hat_2). Keys fed as in analysis/recovery.hpp (correlated family, n = 2).
#include "core/rules/registry.hpp"

namespace vla::analysis {

double residual_write_correlation(const std::string& mixer, const MixerConfig& cfg, int d, double rho,
                                  std::uint64_t seed);

}  // namespace vla::analysis
