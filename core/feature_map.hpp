#pragma once
// phi(x) = ELU(x) + 1, the positive feature map of linear attention (paper eq. 3, Alg. 1 lines 8, 24),
// applied to a vector, and the unit-norm map of Alg. 1 lines 9, 10, 20. The scalar phi is core/phi.hpp.
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

}  // namespace vla
