// Mixer-LEVEL gradient checks in multiprecision (mp50, u = 2^-167): the backward through time of
// linear attention and DeltaNet, softmax attention's backward, and every VLA variant, each on one
// mixer layer (tests/train/mixer_gradcheck.hpp: random input X and upstream gradient R, dX and every
// weight of the block). With the same measured bound as in double (10x the finite difference's own
// error, core/model/gradcheck.hpp), which in mp50 is ~1e-30: a formula error of any size, or a double
// constant leaking into the backward (an error ~1e-17, invisible in double's check), fails.
// d_h = 3 on purpose: 1/sqrt(d_h) is not a dyadic number, so a scale computed in double on one side
// and in T on the other would show. Small (d = 4, H = 2, d_h = 3, T = 5) so that each rule takes
// well under a second; a separate TU because mp50 instantiations compile slowly.
#include "mixer_gradcheck.hpp"

#include <catch2/catch.hpp>

using namespace vla;

namespace {

void check_mp50(const MixerConfig& mc, const std::string& label) {
  const test::MixerShape shape{4, 2, 3, 5};
  double worst = 0.0;
  for (const auto& c : test::mixer_gradcheck<mp50>(mc, shape, 31)) {
    INFO(label << " (mp50) " << c.name << ": rel_err " << c.rel_err << " bound " << c.bound << " |g| " << c.grad_norm);
    if (test::zero_by_design(mc, c.name)) CHECK(c.grad_norm < 1e-40);
    else CHECK(c.grad_norm > 1e-3);
    CHECK(c.pass());
    if (!test::zero_by_design(mc, c.name)) worst = std::max(worst, c.rel_err);
  }
  INFO(label << " (mp50) worst relative error " << worst);
  CHECK(worst < 1e-25);  // double's accuracy would be ~1e-10: the check really ran in mp50
}

MixerConfig mixer(const std::string& name) {
  MixerConfig mc;
  mc.mixer = name;
  return mc;
}

}  // namespace

// A failure in any case below names the tensor; see layer_gradcheck_test.cpp for what each tensor's
// failure means. These pass in double already; failing here only means an error below double's noise.
TEST_CASE("mixer gradcheck mp50: linear attention", "[train]") { check_mp50(mixer("linear"), "linear"); }
TEST_CASE("mixer gradcheck mp50: deltanet", "[train]") {
  check_mp50(mixer("deltanet"), "deltanet");
  MixerConfig ungated = mixer("deltanet");
  ungated.deltanet_gated = false;
  check_mp50(ungated, "deltanet (ungated)");
}
TEST_CASE("mixer gradcheck mp50: softmax", "[train]") { check_mp50(mixer("softmax"), "softmax"); }
TEST_CASE("mixer gradcheck mp50: vla", "[train]") { check_mp50(mixer("vla"), "vla"); }
TEST_CASE("mixer gradcheck mp50: vla-v2", "[train]") {
  check_mp50(mixer("vla-v2"), "vla-v2");
  MixerConfig tame = mixer("vla-v2");  // see layer_gradcheck_test.cpp: the same rule without its blow-up
  tame.penalty.lambda0 = 10.0;
  check_mp50(tame, "vla-v2 (lambda0 = 10)");
}
TEST_CASE("mixer gradcheck mp50: vla-rls", "[train]") { check_mp50(mixer("vla-rls"), "vla-rls"); }
TEST_CASE("mixer gradcheck mp50: vla-fixed-a", "[train]") { check_mp50(mixer("vla-fixed-a"), "vla-fixed-a"); }
TEST_CASE("mixer gradcheck mp50: vla-no-knorm", "[train]") { check_mp50(mixer("vla-no-knorm"), "vla-no-knorm"); }
