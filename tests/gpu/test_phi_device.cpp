// phi = ELU + 1 and its derivative as the kernels compute them (core/phi.hpp's device form: both arms
// computed, one selected) against exp in double on the host, over -120 .. 120 and the special
// values. The kernels' own tests compare whole outputs at T d 2^-24, which a feature map a few ulps worse (a
// fast exp, say: its error grows with |x|) or one that turned NaN into a number would pass; this holds the
// map itself to CUDA expf's documented 2 ulps and to NaN in, NaN out.
#include "tests/gpu/phi_probe.hpp"

#include "gpu/device_query.hpp"

#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

namespace {

// |got - want| within `ulps` spacings of the floats at want. A result below the normal range (exp(x) for x
// under about -87.3) is held to FLT_MIN absolutely: expf may flush it to zero.
bool within_ulps(float got, double want, double ulps) {
  if (std::abs(want) < FLT_MIN) return std::abs(double(got) - want) <= FLT_MIN;
  return std::abs(double(got) - want) <= ulps * std::ldexp(1.0, std::ilogb(want) - 23);
}

}  // namespace

// If it failed: the device feature map lost accuracy (a fast exp), changed a value at a branch point (0,
// -0), turned NaN into a number, or the unused arm leaked into the result (x + 1 for x <= 0, an overflowed
// exp for large x).
TEST_CASE("phi and phi' in device code: exp to 2 ulps below 0, x + 1 and 1 exactly above, NaN stays NaN", "[gpu]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: skipped"); return; }
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {0.f, -0.f, FLT_MIN, -FLT_MIN, FLT_TRUE_MIN, -FLT_TRUE_MIN, FLT_MAX, -FLT_MAX, inf, -inf,
                          88.7f, 89.f, 1e30f, -87.3f, -103.9f, -104.f, -150.f, 1e-8f, -1e-8f};
  for (int i = -200000; i <= 200000; ++i) x.push_back(static_cast<float>(i) * 6e-4f);  // -120 .. 120
  std::vector<float> phi, dphi;
  vla::gpu::test::phi_on_device(x, phi, dphi);
  REQUIRE(phi.size() == x.size());
  int bad = 0;
  for (std::size_t i = 0; i < x.size() && bad < 5; ++i) {
    const float v = x[i];
    bool ok;
    if (v > 0.f) {
      ok = phi[i] == v + 1.f && dphi[i] == 1.f;
    } else {
      const double e = std::exp(double(v));  // 1 at +-0, 0 at -inf
      ok = within_ulps(phi[i], e, 2.0) && within_ulps(dphi[i], e, 2.0);
    }
    if (!ok) {
      ++bad;
      FAIL_CHECK("x = " << v << ": phi " << phi[i] << ", phi' " << dphi[i] << ", want " << (v > 0.f ? double(v) + 1.0 : std::exp(double(v))));
    }
  }
  CHECK(bad == 0);
  const std::vector<float> n = {nan, -nan};
  vla::gpu::test::phi_on_device(n, phi, dphi);
  for (std::size_t i = 0; i < n.size(); ++i) {
    CHECK(std::isnan(phi[i]));
    CHECK(std::isnan(dphi[i]));
  }
}
