#pragma once
// phi(x) = ELU(x) + 1, the positive feature map of linear attention (paper eq. 3, Alg. 1 lines 8, 24),
// applied to a vector, and the unit-norm map of Alg. 1 lines 9, 10, 20 with its adjoint. The scalar
// phi is core/phi.hpp.
#include "core/phi.hpp"  // the scalar phi, phi', sigmoid (shared with the CUDA kernels)
#include "core/scalar.hpp"

namespace vla {

template <class T> inline Vec<T> elu_plus_one(const Vec<T>& x) {
  return x.unaryExpr([](const T& a) { return elu_plus_one(a); });
}

// x / ||x||; a zero vector stays zero (its direction is undefined, and writing nothing is the
// only choice that keeps the recurrence finite).
template <class T> inline Vec<T> unit(const Vec<T>& x) {
  T n = x.norm();
  if (n == T(0)) return x;
  return x / n;
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
