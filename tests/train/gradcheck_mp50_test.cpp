// The VLA backward through time checked in multiprecision (mp50, u = 2^-167): with the same measured
// bound as in double (10x the finite difference's own error, gradcheck.hpp), which in mp50 is ~1e-30,
// so any formula error in the A-loop or S-loop backward (even one invisible in double's noise) fails.
// Separate TU: mp50 instantiations compile slowly. [slow]: ~10^4 mp50 forwards of the tiny model.
#include "core/model/gradcheck.hpp"

#include <catch2/catch.hpp>

using namespace vla;

TEST_CASE("gradcheck vla (mp50)", "[train][slow]") {
  MixerConfig mc;
  mc.mixer = "vla";
  const auto pr = model::tiny_problem(mc, 11);
  for (const auto& c : model::gradcheck<mp50>(pr, 5)) {
    INFO(c.name << " rel_err " << c.rel_err << " bound " << c.bound);
    CHECK(c.grad_norm > 1e-6);
    CHECK(c.pass());
  }
}
