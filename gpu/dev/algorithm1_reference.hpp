#pragma once
// Algorithm 1 (lines 4-26) of the VLA paper written out in double on the host: the reference the GPU
// development drivers (gpu/dev/*_check.cu) hold their kernels against, independent of core/. One sequence;
// q, k, v, u and o are (T, d) rows. In may be float (the kernels' own inputs) or double (the backward
// driver's finite differences perturb the inputs in double).
#include "core/rules/gpu_kernel.hpp"  // RecurrentParams

#include <cmath>
#include <vector>

namespace vla::gpu::dev {

inline double phi(double x) { return x > 0 ? x + 1 : std::exp(x); }  // ELU + 1

template <class In, class Out>
void algorithm1(const In* q, const In* k, const In* v, const In* u, Out* o, int T, int d, const RecurrentParams& p) {
  std::vector<double> A(d * d, 0.0), S(d * d, 0.0), z(d, 0.0), kf(d), kh(d), qf(d), uu(d), y(d), al(d), e(d);
  for (int i = 0; i < d; ++i) A[i * d + i] = 1.0 / p.lambda0;
  for (int t = 0; t < T; ++t) {
    const In *qt = q + t * d, *kt = k + t * d, *vt = v + t * d, *ut = u + t * d;
    double kn = 0, un = 0;
    for (int i = 0; i < d; ++i) { kf[i] = phi(kt[i]); qf[i] = phi(qt[i]); kn += kf[i] * kf[i]; un += double(ut[i]) * ut[i]; }
    for (int i = 0; i < d; ++i) { kh[i] = kf[i] / std::sqrt(kn); uu[i] = ut[i] / std::sqrt(un) / std::sqrt(double(d)); }
    double delta = 1;
    for (int i = 0; i < d; ++i) { y[i] = 0; for (int j = 0; j < d; ++j) y[i] += A[i * d + j] * uu[j]; delta += uu[i] * y[i]; }
    if (!(delta >= p.eps)) delta = p.eps;
    for (int i = 0; i < d; ++i) for (int j = 0; j < d; ++j) A[i * d + j] -= y[i] * y[j] / delta;
    if (p.refresh_period > 0 && (t + 1) % p.refresh_period == 0) for (int i = 0; i < d; ++i) A[i * d + i] += p.refresh_eta;
    double an = 0;
    for (int i = 0; i < d; ++i) { al[i] = 0; for (int j = 0; j < d; ++j) al[i] += A[i * d + j] * kh[j]; an += al[i] * al[i]; }
    for (int i = 0; i < d; ++i) al[i] /= std::sqrt(an);
    for (int i = 0; i < d; ++i) { e[i] = vt[i]; for (int j = 0; j < d; ++j) e[i] -= S[i * d + j] * kh[j]; }
    for (int i = 0; i < d; ++i) for (int j = 0; j < d; ++j) S[i * d + j] += e[i] * al[j];
    double den = 0;
    for (int i = 0; i < d; ++i) { z[i] += kf[i]; den += qf[i] * z[i]; }
    den = den < p.eps ? p.eps : den;
    for (int i = 0; i < d; ++i) { double s = 0; for (int j = 0; j < d; ++j) s += S[i * d + j] * qf[j]; o[t * d + i] = Out(s / den); }
  }
}

}  // namespace vla::gpu::dev
