#pragma once
// How the chunkwise forms' matrix products take their operands. A product's sums are always carried in
// the working precision (fp32 on the GPU, the scalar T on the CPU); what changes is what the multiplier
// reads:
//   full  each operand as the working precision holds it. On the GPU's tensor cores that is 3xTF32
//         (each fp32 operand split into two TF32 parts: represented to 2^-21 of itself, sums in fp32:
//         gpu/chunked_vla_forward.cu), so the products are as accurate as fp32 FMAs.
//   tf32  each operand rounded to nearest at 11 significant bits (TF32's 10 stored mantissa bits and the
//         implicit one: unit roundoff 2^-11) before the product; one tensor-core pass on the GPU, the
//         sums in fp32. On the CPU the same rounding emulates that pass in any scalar (round_to_tf32
//         below), so the GPU's one-pass forward can be held to the rounding model it claims.
// Plain C++17 (no Eigen): shared by nvcc- and g++-compiled code.
#include <array>
#include <cmath>
#include <string_view>
#include <utility>

namespace vla {

enum class ProductOperands { Full, Tf32 };

// The values' names, wherever one is read (`vla layer-forward --products` through core/knob.hpp's
// parse_knob_value; gpu/dev/chunked_vla_forward_check.cu's CVLA_PRODUCTS).
constexpr std::array<std::pair<std::string_view, ProductOperands>, 2> knob_values(ProductOperands) {
  return {{{"full", ProductOperands::Full}, {"tf32", ProductOperands::Tf32}}};
}

// TF32's significant bits (10 stored and the implicit leading one).
inline constexpr int kTf32SignificantBits = 11;

// x rounded to nearest (ties to even) at kTf32SignificantBits significant bits; zeros, infinities and NaN
// unchanged. Exponent range as double's: TF32's is fp32's, and the emulation does not model its overflow.
inline double round_to_tf32(double x) {
  if (!std::isfinite(x) || x == 0.0) return x;
  int e = 0;
  const double m = std::frexp(x, &e);  // x = m 2^e, 0.5 <= |m| < 1
  return std::ldexp(std::nearbyint(std::ldexp(m, kTf32SignificantBits)), e - kTf32SignificantBits);
}

}  // namespace vla
