#pragma once
// The scalar types every recurrence runs in, and what the toolkit knows about each.
//
// float, double       IEEE binary32/binary64, hardware arithmetic.
// Eigen::half         IEEE binary16. Eigen 3.4 emulates every operation on the CPU by widening to
//                     float, computing, and rounding back to nearest-even: each op is rounded to the
//                     format, as fp16 hardware without fused accumulation would do.
// Eigen::bfloat16     bfloat16 (8-bit exponent, 8-bit significand), emulated the same way.
// mp50, mp100         MPFR binary floating point with 50 and 100 significant decimal digits
//                     (boost::multiprecision::mpfr_float_backend, correctly rounded per op).
//                     These are the ground truth every other precision is measured against.
//
// Generic code calls math functions unqualified after `using std::sqrt;` etc., so that argument
// dependent lookup finds Eigen's half/bfloat16 overloads and Boost's multiprecision overloads.
#include <Eigen/Core>
#include <boost/multiprecision/mpfr.hpp>
#include <boost/multiprecision/eigen.hpp>

#include <cmath>
#include <limits>
#include <string_view>
#include <type_traits>

namespace vla {

using mp50 = boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<50>,
                                           boost::multiprecision::et_off>;
using mp100 = boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<100>,
                                            boost::multiprecision::et_off>;
using half = Eigen::half;
using bfloat16 = Eigen::bfloat16;

template <class T> using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;
template <class T> using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;

// Facts about a scalar type. unit_roundoff is u = 2^-p for a p-bit significand (round to nearest):
// a single correctly rounded operation has relative error at most u. Test tolerances are stated in
// multiples of u, so they follow from the format rather than from observed results.
template <class T> struct ScalarInfo;

template <> struct ScalarInfo<float> {
  static constexpr std::string_view name = "float";
  static constexpr int significand_bits = 24;
  static constexpr bool is_ground_truth = false;
};
template <> struct ScalarInfo<double> {
  static constexpr std::string_view name = "double";
  static constexpr int significand_bits = 53;
  static constexpr bool is_ground_truth = false;
};
template <> struct ScalarInfo<half> {
  static constexpr std::string_view name = "half";
  static constexpr int significand_bits = 11;
  static constexpr bool is_ground_truth = false;
};
template <> struct ScalarInfo<bfloat16> {
  static constexpr std::string_view name = "bfloat16";
  static constexpr int significand_bits = 8;
  static constexpr bool is_ground_truth = false;
};
template <> struct ScalarInfo<mp50> {
  static constexpr std::string_view name = "mp50";
  static constexpr int significand_bits = 167;  // ceil(50 * log2(10)) + 1, as MPFR allocates
  static constexpr bool is_ground_truth = true;
};
template <> struct ScalarInfo<mp100> {
  static constexpr std::string_view name = "mp100";
  static constexpr int significand_bits = 333;
  static constexpr bool is_ground_truth = true;
};

template <class T> inline double unit_roundoff() {
  return std::ldexp(1.0, -ScalarInfo<T>::significand_bits);
}

// Conversions through double are exact for every format narrower than double; for the MPFR types
// converting *from* double is exact and converting *to* double rounds once.
template <class T> inline T from_double(double x) { return T(x); }
template <class T> inline double to_double(const T& x) { return static_cast<double>(x); }

// Conversion between any two scalars of the toolkit. Going through the wider of the two keeps one
// rounding: MPFR -> narrow goes through double (two roundings, documented as acceptable since the
// result is then rounded to <= 24 bits and double carries 53), narrow -> MPFR is exact.
template <class To, class From> inline To scalar_cast(const From& x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (ScalarInfo<To>::is_ground_truth && ScalarInfo<From>::is_ground_truth) {
    return To(x);
  } else {
    return To(static_cast<double>(x));
  }
}

template <class To, class From>
inline Mat<To> cast_matrix(const Mat<From>& m) {
  if constexpr (std::is_same_v<To, From>) {
    return m;
  } else {
    return m.unaryExpr([](const From& x) { return scalar_cast<To>(x); });
  }
}
template <class To, class From>
inline Vec<To> cast_vector(const Vec<From>& v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else {
    return v.unaryExpr([](const From& x) { return scalar_cast<To>(x); });
  }
}

template <class T> inline bool is_finite(const T& x) {
  using std::isfinite;
  if constexpr (ScalarInfo<T>::is_ground_truth) {
    return boost::multiprecision::isfinite(x);
  } else if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
    return (Eigen::numext::isfinite)(x);
  } else {
    return isfinite(x);
  }
}

template <class Derived> inline bool all_finite(const Eigen::MatrixBase<Derived>& m) {
  // float and double: a finite sum means every entry is finite (an inf or NaN entry makes the sum inf
  // or NaN), and Eigen vectorises the sum; only a non-finite sum (a non-finite entry, or finite entries
  // whose sum overflows) needs the entry-by-entry test below. MixerLayer calls this after every step.
  if constexpr (std::is_same_v<typename Derived::Scalar, float> || std::is_same_v<typename Derived::Scalar, double>)
    if (std::isfinite(m.sum())) return true;
  for (Eigen::Index j = 0; j < m.cols(); ++j)
    for (Eigen::Index i = 0; i < m.rows(); ++i)
      if (!is_finite(m(i, j))) return false;
  return true;
}

// Frobenius norm computed in the scalar itself (so a half state reports the norm half would see),
// returned as double for statistics.
template <class Derived> inline double frobenius(const Eigen::MatrixBase<Derived>& m) {
  return to_double(m.norm());
}

}  // namespace vla
