#pragma once
// The scalar feature map and gate every rule uses, written once for the CPU templates (any scalar:
// float, double, Eigen::half, Eigen::bfloat16, MPFR; exp found by argument-dependent lookup) and for
// the CUDA kernels (float, in device code). Plain C++17, no Eigen, so nvcc-compiled kernels include it.
//
//   phi(x) = ELU(x) + 1 = x + 1 (x > 0), exp(x) (x <= 0)   paper eq. (3), Alg. 1 lines 8 and 24
//   phi'(x) = 1 (x > 0), exp(x) (x <= 0)                   so phi > 0 and 0 < phi' <= 1 everywhere
//   sigmoid(g) = 1 / (1 + exp(-g))                          DeltaNet's gate beta_t, eq. (4)
#include <cmath>

#if defined(__CUDACC__)
#define VLA_HOST_DEVICE __host__ __device__
#else
#define VLA_HOST_DEVICE
#endif

namespace vla {

// In device code both arms are computed and one is selected. Written as a choice, nvcc branches around
// expf at every call; with lanes on both sides of 0 a warp runs both arms anyway, and stalls resolving a
// divergent branch per element. The value is the same for every x: x + 1 above 0, exp(x) otherwise (exp's
// argument clamped at 0 only so that the unused arm never overflows), NaN -> NaN.
template <class T> VLA_HOST_DEVICE inline T elu_plus_one(const T& x) {
  using std::exp;
#if defined(__CUDA_ARCH__)
  const T e = T(exp(x > T(0) ? T(0) : x));
  return x > T(0) ? T(x + T(1)) : e;
#else
  return x > T(0) ? T(x + T(1)) : T(exp(x));
#endif
}

template <class T> VLA_HOST_DEVICE inline T elu_plus_one_grad(const T& x) {
  using std::exp;
#if defined(__CUDA_ARCH__)
  const T e = T(exp(x > T(0) ? T(0) : x));
  return x > T(0) ? T(1) : e;
#else
  return x > T(0) ? T(1) : T(exp(x));
#endif
}

template <class T> VLA_HOST_DEVICE inline T sigmoid(const T& x) {
  using std::exp;
  return T(1) / (T(1) + T(exp(-x)));
}

}  // namespace vla
