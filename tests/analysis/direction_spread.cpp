// analysis/direction_spread.hpp says how many directions a head's penalty directions span. Length and sign
// must not matter (directions, |cos|), the diagonal must not count, and the two measures must read the
// extremes and the isotropic case as their formulas say: a wrong normalisation would read parallel columns
// as spread or random ones as parallel, and the trained heads' collapse (docs/chunkwise-vla.md) would be an
// artefact.
#include "analysis/direction_spread.hpp"

#include <catch2/catch.hpp>

#include <random>

using namespace vla;
using namespace vla::analysis;

namespace {
Mat<double> gaussian(int d, int T, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<double> n;
  return Mat<double>::NullaryExpr(d, T, [&] { return n(g); });
}
}  // namespace

TEST_CASE("direction spread: parallel, orthogonal and isotropic directions read as their formulas say", "[analysis]") {
  Mat<double> par(3, 4);
  par << 1, -2, 0.5, 3, 2, -4, 1, 6, -1, 2, -0.5, -3;
  CHECK(mean_abs_cosine(par) == Approx(1.0).epsilon(1e-15));
  CHECK(participation_ratio(par) == Approx(1.0).epsilon(1e-12));
  CHECK(mean_abs_cosine(Mat<double>::Identity(5, 5)) == 0.0);
  CHECK(participation_ratio(Mat<double>::Identity(5, 5)) == Approx(5.0).epsilon(1e-12));
  CHECK(participation_ratio(Mat<double>(3.0 * Mat<double>::Identity(6, 4))) == Approx(4.0).epsilon(1e-12));  // T < d: T
  // Independent isotropic directions, d = 32: E|cos| = Gamma(16) / (sqrt(pi) Gamma(16.5)) = 0.1422, and the
  // participation ratio T d / (T + d - 1) = 29.70 at T = 400, 14.29 at T = 25 (about a tenth either way over seeds).
  const Mat<double> R = gaussian(32, 400, 3);
  CHECK(mean_abs_cosine(R) == Approx(0.1422).margin(0.005));
  CHECK(participation_ratio(R) == Approx(29.70).epsilon(0.05));
  CHECK(participation_ratio(gaussian(32, 25, 4)) == Approx(14.29).epsilon(0.12));
  // A zero column is no direction; refusals name the function and the reason.
  Mat<double> z = par;
  z.col(1).setZero();
  CHECK(participation_ratio(z) == Approx(1.0).epsilon(1e-12));
  CHECK_THROWS_WITH(mean_abs_cosine(Mat<double>::Ones(3, 1)), Catch::Contains("at least 2 columns"));
  CHECK_THROWS_WITH(participation_ratio(Mat<double>::Zero(3, 2)), Catch::Contains("every column is zero"));
}
