// Precision<half> and Precision<bfloat16> against mp100 on the shared case (precision_case.hpp).
// A failure means the recurrence in this format loses more accuracy than its unit roundoff allows:
// a step computed in the wrong type, a double rounding, or an unstable formulation.
#include "precision_case.hpp"

#include <catch2/catch.hpp>

using namespace vla;
using namespace vla::test;

template <class P> static void check_against_mp100() {
  const double u = unit_roundoff<typename P::storage_t>();
  for (const char* m : kPrecMixers) {
    const double err = precision_case_error(precision_case_run<P>(m), precision_case_reference(m));
    INFO(P::name() << " " << m << ": relative error " << err << " = " << err / u << " u, tolerance "
                   << precision_case_tolerance(u) / u << " u");
    CHECK(err <= precision_case_tolerance(u));
    CHECK(err == err);  // not NaN
  }
}

TEST_CASE("precision: half vs mp100", "[precision]") { check_against_mp100<Precision<half>>(); }
TEST_CASE("precision: bfloat16 vs mp100", "[precision]") { check_against_mp100<Precision<bfloat16>>(); }
