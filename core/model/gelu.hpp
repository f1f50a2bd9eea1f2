#pragma once
// GELU, tanh form (GPT-2): gelu(x) = x/2 (1 + tanh(c (x + 0.044715 x^3))), c = sqrt(2/pi).
// The tanh form is used because tanh exists for every scalar type here (mp50 included).
#include "core/scalar.hpp"

#include <cmath>

namespace vla::model {

template <class T> inline T gelu(const T& x) {
  using std::tanh;
  const T c = T(0.7978845608028654);
  return T(0.5) * x * (T(1) + T(tanh(T(c * (x + T(0.044715) * x * x * x)))));
}
template <class T> inline T gelu_grad(const T& x) {
  using std::tanh;
  const T c = T(0.7978845608028654);
  const T th = tanh(T(c * (x + T(0.044715) * x * x * x)));
  return T(0.5) * (T(1) + th) + T(0.5) * x * (T(1) - th * th) * c * (T(1) + T(3) * T(0.044715) * x * x);  // T(3) * T(0.044715): exactly d/dx of the forward's constant, in T
}
template <class T> Mat<T> gelu_forward(const Mat<T>& Z) { return Z.unaryExpr([](const T& x) { return gelu(x); }); }
template <class T> Mat<T> gelu_backward(const Mat<T>& dA, const Mat<T>& Z) {
  return (dA.array() * Z.unaryExpr([](const T& x) { return gelu_grad(x); }).array()).matrix();
}

}  // namespace vla::model
