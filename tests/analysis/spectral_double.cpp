// Known answers for analysis/spectral.hpp in double: closed form vs JacobiSVD vs power iteration on
// hand-built vectors, and the Lyapunov exponent of a constant diagonal map.
#include "analysis/spectral.hpp"

#include <catch2/catch.hpp>

using namespace vla;
using namespace vla::analysis;

namespace {
constexpr double u = 0x1p-53;
Vec<double> e(int d, int i) { Vec<double> v = Vec<double>::Zero(d); v(i) = 1; return v; }
}  // namespace

TEST_CASE("closed form: orthogonal unit vectors give the golden ratio, equal ones give 1", "[analysis]") {
  // a ⟂ b unit: sigma_max^2 = 1 + (1 + sqrt 5)/2 = phi^2, so ||I - a b^T||_2 = phi = (1 + sqrt 5)/2.
  // If this failed, the closed form (and the ledger's Prop. 2 counterexample) would be wrong.
  const double phi = (1 + std::sqrt(5.0)) / 2;
  for (int d : {2, 3, 8}) {
    const Vec<double> a = e(d, 0), b = e(d, 1);
    const Mat<double> M = step_map(a, b, 1.0);
    // 8u: a handful of correctly rounded operations on O(1) numbers.
    CHECK(std::abs(rank1_perturbation_norm(1.0, a, b) - phi) <= 8 * u * phi);
    // JacobiSVD converges to a few ulps of the exact singular value.
    CHECK(std::abs(svd_norm(M) - phi) <= 16 * u * phi);
    CHECK(std::abs(power_iteration_norm(M) - phi) <= 1e-7);  // Rayleigh quotient stopped at 1e-14 relative: sqrt -> 1e-7
  }
  // a = b unit: I - a a^T is an orthogonal projection (d >= 2), norm exactly 1.
  Vec<double> a = Vec<double>::Ones(5) / std::sqrt(5.0);
  CHECK(std::abs(rank1_perturbation_norm(1.0, a, a) - 1.0) <= 8 * u);
  CHECK(std::abs(svd_norm(step_map(a, a, 1.0)) - 1.0) <= 16 * u);
}

TEST_CASE("closed form matches JacobiSVD on random non-unit rank-1 perturbations of c I", "[analysis]") {
  // Random a, b of different lengths and c in {0.3, 1, 2}: the 2x2 derivation covers every case.
  std::srand(3);
  for (int trial = 0; trial < 20; ++trial) {
    const int d = 2 + trial % 7;
    const Vec<double> a = Vec<double>::Random(d) * 3, b = Vec<double>::Random(d);
    for (double c : {0.3, 1.0, 2.0}) {
      const double sv = svd_norm(step_map(a, b, c));
      // Both sides are backward stable: agreement to 64u relative is far tighter than any error in the formula would allow.
      CHECK(std::abs(rank1_perturbation_norm(c, a, b) - sv) <= 64 * u * sv);
    }
  }
  // d = 1: M is the scalar c - a b.
  CHECK(rank1_perturbation_norm<double>(1.0, Vec<double>::Constant(1, 1.0), Vec<double>::Constant(1, -1.0)) == 2.0);
}

TEST_CASE("power iteration on a diagonal matrix returns the largest |entry|", "[analysis]") {
  Mat<double> D = Mat<double>::Zero(4, 4);
  D.diagonal() << 0.5, -3.0, 1.0, 2.0;  // gap 3 vs 2: converges geometrically with ratio (2/3)^2
  CHECK(std::abs(power_iteration_norm(D) - 3.0) <= 1e-7);
}

TEST_CASE("Lyapunov exponent of a constant diagonal map is log of its largest entry", "[analysis]") {
  Mat<double> D = Mat<double>::Zero(3, 3);
  D.diagonal() << 0.5, 1.5, -0.2;
  LyapunovQR<double> l(3, 2);
  for (int t = 0; t < 1000; ++t) l.push(D);
  // From a random start the mean of log |R_11| is log 1.5 plus a transient |log c|/T, where c is the
  // start's component along the top direction (O(1) for a random start): 5e-3 bounds it at T = 1000.
  CHECK(std::abs(l.largest() - std::log(1.5)) <= 5e-3);
}
