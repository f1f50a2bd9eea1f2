#pragma once
// phi(x) = ELU(x) + 1, the positive feature map of linear attention (paper eq. 3, Alg. 1 lines 8, 24).
// phi(x) = x + 1 for x > 0 and exp(x) for x <= 0, so phi > 0 everywhere and phi'(x) = min(1, exp(x)).
#include "core/scalar.hpp"

namespace vla {

template <class T> inline T elu_plus_one(const T& x) {
  using std::exp;
  return x > T(0) ? T(x + T(1)) : T(exp(x));
}

template <class T> inline Vec<T> elu_plus_one(const Vec<T>& x) {
  return x.unaryExpr([](const T& a) { return elu_plus_one(a); });
}

// d phi / dx, used by the backward passes.
template <class T> inline T elu_plus_one_grad(const T& x) {
  using std::exp;
  return x > T(0) ? T(1) : T(exp(x));
}

template <class T> inline T sigmoid(const T& x) {
  using std::exp;
  return T(1) / (T(1) + T(exp(-x)));
}

// x / ||x||; a zero vector stays zero (its direction is undefined, and writing nothing is the
// only choice that keeps the recurrence finite).
template <class T> inline Vec<T> unit(const Vec<T>& x) {
  T n = x.norm();
  if (n == T(0)) return x;
  return x / n;
}

}  // namespace vla
