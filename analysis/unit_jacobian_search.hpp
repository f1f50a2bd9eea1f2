#pragma once
// Proposition 2 asks ||I - alpha_hat k_hat^T||_2 = 1 for all unit k_hat, alpha_hat. This searches
// the smallest dimension d = 1, 2, ... for a pair of unit vectors that breaks it, over a fixed
// candidate set per d (+-e_i and (+-e_i +- e_j)/sqrt(2)), and reports the pair with the largest norm
// at the first d where that norm exceeds 1 + tol. The norm is computed three ways in mp50: closed
// form (analysis/spectral.hpp), JacobiSVD, and power iteration.
//
// Two searches: over all unit pairs (what Prop. 2 states), and over pairs with k_hat . alpha_hat > 0,
// the only pairs VLA can produce (alpha_hat = unit(A_t k_hat) with A_t symmetric positive definite).
#include <string>
#include <vector>

namespace vla::analysis {

struct UnitJacobianCounterexample {
  bool found = false;
  int d = 0;
  std::vector<double> k_hat, alpha_hat;           // (d) each
  double norm_closed = 0, norm_svd = 0, norm_power = 0;  // ||I - alpha_hat k_hat^T||_2, three ways (mp50)
  std::string describe() const;
};

// tol: the excess over 1 that counts as a violation (mp50 rounding is ~1e-50; 1e-30 leaves room).
UnitJacobianCounterexample search_unit_jacobian(int max_d, bool positive_overlap_only, double tol = 1e-30);

// sup over unit pairs with k_hat . alpha_hat = p of ||I - alpha_hat k_hat^T||_2 (closed form; d >= 2):
// sqrt(1 + (1 - 2p + sqrt(5 - 4p)) / 2).
double unit_pair_norm(double p);

}  // namespace vla::analysis
