// Precision<float> and Precision<double> against mp100 on the shared case (precision_case.hpp).
// A failure means the recurrence in this format loses more accuracy than its unit roundoff allows:
// a step computed in the wrong type, a double rounding, or an unstable formulation.
#include "precision_case.hpp"

#include <catch2/catch.hpp>

using namespace vla;
using namespace vla::test;

TEST_CASE("precision: float vs mp100", "[precision]") { check_against_mp100<Precision<float>>(); }
TEST_CASE("precision: double vs mp100", "[precision]") { check_against_mp100<Precision<double>>(); }
