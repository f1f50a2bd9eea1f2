#pragma once
// How many directions a stream's vectors span: the columns of X (d x T), each taken as a direction (its
// length and sign dropped). The paper credits VLA's penalty A_t with per-direction selectivity (Sec. 3, the
// "key-space whitening" view of Sec. 7.1): A_t contracts along the penalty directions u_s it has seen, so the
// u_s of a trained head show how many directions A_t can tell apart.
#include "core/scalar.hpp"

namespace vla::analysis {

// The mean of |cos(x_t, x_s)| over the pairs t < s (T >= 2): 1 when every column is parallel,
// Gamma(d/2) / (sqrt(pi) Gamma((d+1)/2)) for independent isotropic directions (0.142 at d = 32).
// A zero column counts as orthogonal to every other.
double mean_abs_cosine(const Mat<double>& X);

// The participation ratio of the directions' second moment, (sum lambda)^2 / sum lambda^2 over the
// eigenvalues lambda of sum_t x_t x_t^T / ||x_t||^2 (zero columns left out): 1 when every column is
// parallel, min(T, d) when they are orthogonal; ~T d / (T + d - 1) for T independent isotropic directions in d
// (E sum lambda^2 = T + T (T - 1) / d).
// Throws std::invalid_argument when no column is non-zero.
double participation_ratio(const Mat<double>& X);

}  // namespace vla::analysis
