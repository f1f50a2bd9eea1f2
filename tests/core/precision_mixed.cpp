// Precision<half, float> and Precision<bfloat16, float> against mp100 on the shared case (precision_case.hpp).
// A failure means the recurrence in this format loses more accuracy than its unit roundoff allows:
// a step computed in the wrong type, a double rounding, or an unstable formulation.
#include "precision_case.hpp"

#include <catch2/catch.hpp>

using namespace vla;
using namespace vla::test;

TEST_CASE("precision: half+float vs mp100", "[precision]") { check_against_mp100<Precision<half, float>>(); }
TEST_CASE("precision: bfloat16+float vs mp100", "[precision]") { check_against_mp100<Precision<bfloat16, float>>(); }
