// The same known answers in mp50 (JacobiSVD and the closed form run on MPFR types), and the unit
// Jacobian search: its counterexamples must be real (closed form = SVD = power iteration).
#include "analysis/spectral.hpp"
#include "analysis/unit_jacobian_search.hpp"

#include <catch2/catch.hpp>

using namespace vla;
using namespace vla::analysis;

TEST_CASE("mp50: orthogonal unit vectors give the golden ratio to mp50 precision", "[analysis]") {
  const double u = unit_roundoff<mp50>();  // ~1e-50
  Vec<mp50> a = Vec<mp50>::Zero(3), b = Vec<mp50>::Zero(3);
  a(0) = 1;
  b(1) = 1;
  const mp50 phi = (mp50(1) + boost::multiprecision::sqrt(mp50(5))) / 2;
  // A handful of correctly rounded mp50 operations: 16u. If this failed, the mp50 path of the closed
  // form (what the ledger's counterexample is computed in) would be wrong.
  CHECK(to_double(boost::multiprecision::abs(rank1_perturbation_norm(mp50(1), a, b) - phi)) <= 16 * u);
  // JacobiSVD in mp50 reaches a few ulps too; 1e3 u leaves room for its sweeps.
  CHECK(to_double(boost::multiprecision::abs(svd_norm(step_map(a, b, mp50(1))) - phi)) <= 1e3 * u);
  // a = b: the projection I - a a^T has norm 1.
  CHECK(to_double(boost::multiprecision::abs(rank1_perturbation_norm(mp50(1), a, a) - mp50(1))) <= 16 * u);
}

TEST_CASE("unit Jacobian search: the counterexamples it reports agree three ways", "[analysis]") {
  // d = 1, k = 1, alpha = -1 gives |1 - (-1)| = 2: the search must find d = 1 first.
  const auto any = search_unit_jacobian(3, false);
  REQUIRE(any.found);
  CHECK(any.d == 1);
  CHECK(std::abs(any.norm_closed - 2.0) <= 1e-15);  // exact in mp50, rounded once to double
  // Restricted to k.alpha > 0 (d = 1 then only allows k = alpha, norm 0): the first violation is in d = 2.
  const auto pos = search_unit_jacobian(3, true);
  REQUIRE(pos.found);
  CHECK(pos.d == 2);
  // Three independent computations of the same norm; power iteration on a 2x2 with a clear gap
  // converges to ~1e-20 within its iteration cap, rounded to double: 1e-14 relative.
  CHECK(std::abs(pos.norm_closed - pos.norm_svd) <= 1e-14);
  CHECK(std::abs(pos.norm_closed - pos.norm_power) <= 1e-14);
  CHECK(std::abs(pos.norm_closed - unit_pair_norm(std::sqrt(0.5))) <= 1e-14);  // k.alpha = 1/sqrt2 for that pair
}
