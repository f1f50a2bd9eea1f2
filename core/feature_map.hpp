#pragma once
// phi(x) = ELU(x) + 1, the positive feature map of linear attention (paper eq. 3, Alg. 1 lines 8, 24),
// applied to a vector, and the unit-norm map of Alg. 1 lines 9, 10, 20 with its adjoint. The scalar
// phi is core/phi.hpp.
#include "core/phi.hpp"  // the scalar phi, phi', sigmoid (shared with the CUDA kernels)
#include "core/scalar.hpp"

#include <limits>

namespace vla {

template <class T> inline Vec<T> elu_plus_one(const Vec<T>& x) {
  return x.unaryExpr([](const T& a) { return elu_plus_one(a); });
}

// x / ||x||; a zero vector stays zero (its direction is undefined, and writing nothing is the
// only choice that keeps the recurrence finite). The norm is the textbook sqrt(sum x_i^2), what every
// format computes in its normal range, unless a square overflowed (||x|| = inf, and x / ||x|| would be
// a silent 0: in half from ||x|| ~ 256 on) or the squares fell below the normal range, where they lose
// digits (||x||^2 < min_normal / u); then x is first scaled by 1 / max |x_i|, as LAPACK's nrm2 does, so
// that unit() is accurate at every scale the format represents (docs/recurrences.md, "Scale").
template <class T> inline Vec<T> unit(const Vec<T>& x) {
  static const T full_precision_squares = T(std::numeric_limits<T>::min()) / from_double<T>(unit_roundoff<T>());
  const T n = x.norm();
  if (is_finite(n) && n * n >= full_precision_squares) return x / n;
  const T m = x.cwiseAbs().maxCoeff();
  if (!(m > T(0)) || !is_finite(m)) return n == T(0) ? x : Vec<T>(x / n);  // zero, or not finite: as is
  const Vec<T> y = x / m;
  return y / y.norm();
}

// The adjoint of unit(): d unit(x) = (I - x_hat x_hat^T) / ||x||, applied to dy; at x = 0, where
// unit() returns x unchanged, the identity.
template <class T> Vec<T> unit_backward(const Vec<T>& x, const Vec<T>& dy) {
  const T n = x.norm();
  if (n == T(0)) return dy;
  const Vec<T> xh = x / n;
  return (dy - xh * xh.dot(dy)) / n;
}

}  // namespace vla
