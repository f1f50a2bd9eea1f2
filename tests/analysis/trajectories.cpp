// Known answers for the trajectory analyses: linear attention's state map is the identity (every
// Jacobian norm 1, product 1, Lyapunov exponent 0); the atlas measures zero error for a run against
// itself and rounding-level error for double against mp50; eq. 13's bound is an identity for VLA.
#include "analysis/atlas_trajectory.hpp"
#include "analysis/jacobian.hpp"
#include "analysis/norms.hpp"

#include <catch2/catch.hpp>

using namespace vla;
using namespace vla::analysis;

TEST_CASE("jacobian analysis: linear attention has identity step maps", "[analysis]") {
  JacobianConfig c;
  c.d_heads = {6};
  c.mixers = {"linear"};
  c.T = 30;
  c.check_steps = 5;
  c.product_T = 10;
  const auto r = run_jacobian(c);
  REQUIRE(r.size() == 1);
  // M_t = I: all three ways give 1 to a few u (the SVD of I is exact; power iteration's Rayleigh
  // quotient of I is 1 up to the rounding of x.x).
  for (double x : r[0].closed) CHECK(x == 1.0);
  for (double x : r[0].svd) CHECK(std::abs(x - 1.0) <= 1e-15);
  for (double x : r[0].power) CHECK(std::abs(x - 1.0) <= 1e-15);
  for (double x : r[0].product) CHECK(std::abs(x - 1.0) <= 1e-15);
  CHECK(std::abs(r[0].lyapunov) <= 1e-15);  // log of 1 +- u per step
  CHECK_THROWS_AS(run_jacobian(JacobianConfig{{}, {"vla"}, 10, 5, 5, 1, {}}), std::invalid_argument);
}

TEST_CASE("jacobian analysis: the three norms agree along a VLAv3 trajectory", "[analysis]") {
  JacobianConfig c;
  c.d_heads = {8};
  c.mixers = {"vla"};
  c.T = 25;
  c.check_steps = 25;
  const auto r = run_jacobian(c);
  // Closed form vs JacobiSVD are both accurate to a few u; power iteration may stop early when the top
  // two singular values nearly coincide (sigma_2 = 1 here), which bounds its error by the gap: 1e-3.
  CHECK(r[0].max_rel_disagreement <= 1e-3);
}

TEST_CASE("atlas: double against mp50 is at rounding level, mp50 against itself is exact", "[analysis]") {
  const HeadStream s = random_head_stream(4, 20, 9);
  MixerConfig cfg;
  const auto ref = atlas_trajectory("mp50", "linear", cfg, s);
  const auto dbl = atlas_trajectory("double", "linear", cfg, s);
  for (int t = 0; t < 20; ++t) {
    // Linear attention adds T outer products: relative error <= ~T d u; 1e3 u covers T = 20, d = 4.
    CHECK((dbl.S[t] - ref.S[t]).norm() <= 1e3 * 0x1p-53 * ref.S[t].norm());
  }
  CHECK(dbl.first_nonfinite == 0);
  CHECK_THROWS_AS(atlas_trajectory("fp8", "linear", cfg, s), std::invalid_argument);
  const auto vla_ref = atlas_trajectory("mp50", "vla", cfg, s);
  CHECK(vla_ref.first_A_not_pd == 0);  // A_t = (lambda0 I + ...)^-1 is SPD in exact arithmetic
}

TEST_CASE("norms: eq. 13 holds along a VLA trajectory (a triangle inequality)", "[analysis]") {
  NormConfig c;
  c.T = 200;
  c.d_head = 8;
  c.seeds = {1};
  c.mixers = {"vla"};
  const auto r = run_norms(c);
  // ||S_t|| <= sum ||e_s|| exactly; rounding can only add ~T u relative.
  CHECK(r.max_excess("vla") <= 16 * 200 * 0x1p-53);
}
