// The mp100 ground truth of the precision tests, and mp50 against it.
#include "precision_case.hpp"

#include <catch2/catch.hpp>

#include <map>

namespace vla::test {

const Mat<double>& precision_case_reference(const std::string& mixer) {
  static std::map<std::string, Mat<double>> cache;
  auto it = cache.find(mixer);
  if (it == cache.end()) it = cache.emplace(mixer, precision_case_run<Precision<mp100>>(mixer)).first;
  return it->second;
}

}  // namespace vla::test

TEST_CASE("precision: mp50 agrees with mp100 to double rounding", "[precision]") {
  // Both are far more accurate than double; Y is returned in double, so the difference is the
  // rounding of the final conversion: at most u_double relative per entry (plus mp50's 2^-167, far
  // smaller). tol = 4 u_double. A failure means the multiprecision path is not precision-independent.
  using namespace vla::test;
  for (const char* m : kPrecMixers) {
    INFO(m);
    const double err = precision_case_error(precision_case_run<vla::Precision<vla::mp50>>(m), precision_case_reference(m));
    CHECK(err <= 4 * vla::unit_roundoff<double>());
  }
}
