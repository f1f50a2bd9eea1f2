#pragma once
// Plain CPU reference backward of linear attention (eq. 3) and DeltaNet (eq. 4, beta = sigmoid(g)),
// one (b, h) sequence, templated scalar, llm.c style; the CUDA kernel is gpu/recurrent_backward.cu.
//
// Forward, per step t:
//   kf = phi(k_raw)   qf = phi(q_raw)   zs_t = zs_{t-1} + kf   r = zs_t.qf, den = r < eps ? eps : r
//   linear:   S_t = S_{t-1} + v kf^T
//   DeltaNet: kh = kf / ||kf||, beta = sigmoid(g) (1 if ungated), e = v - S_{t-1} kh, S_t = beta S_{t-1} + e kh^T
//   o = S_t qf / den
// Adjoints (dS, dzs of S_t, zs_t carried back; g = do / den):
//   read:     gpu/read_backward_reference.hpp (adds to dS and dzs, gives dq_raw)
//   linear:   dv = dS kf;  dkf = dzs + dS^T v;  dS passes to S_{t-1} unchanged
//   DeltaNet: de = dS kh;  dv = de;  dkh = dS^T e - S_{t-1}^T de;  dbeta = <dS, S_{t-1}>_F;
//             dg = dbeta beta (1 - beta);  dS <- beta dS - de kh^T (adjoint of S_{t-1});
//             dkf = dzs + (dkh - kh (kh.dkh)) / ||kf||
//   dq_raw = dqf phi'(q_raw), dk_raw = dkf phi'(k_raw)
#include "gpu/read_backward_reference.hpp"  // phi, dphi, dot, matvec_t, the read and its adjoint

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace vla::gpu::ref {

// q, k, v, dout: (T, d); gate: (T) or empty (ungated; DeltaNet only). Outputs resized: o, dq, dk, dv
// (T, d), dgate (T) (DeltaNet with a gate; else empty).
template <class R>
void delta_backward(bool deltanet, int T, int d, const std::vector<R>& q, const std::vector<R>& k,
                    const std::vector<R>& v, const std::vector<R>& gate, const std::vector<R>& dout, std::vector<R>& o,
                    std::vector<R>& dq, std::vector<R>& dk, std::vector<R>& dv, std::vector<R>& dgate, double eps_d = 1e-4) {
  const std::size_t dd = std::size_t(d) * d, N = std::size_t(T) * d;
  const R eps = R(eps_d);
  const bool gated = deltanet && !gate.empty();
  auto dot = [d](const R* a, const R* b) { return ref::dot(d, a, b); };
  Read<R> read(d, eps);
  std::vector<R> Sprev(N * d), zsv(N), S(dd, R(0)), zs(d, R(0)), kf(d), kh(d), e(d), St(dd);
  R nk, beta;
  // Step t's write from S_{t-1} (Sp): kf, kh, e, beta, and S_t into St (which must not alias Sp). The
  // forward and the reverse pass both call it, so the reverse pass recomputes what the forward did.
  auto step = [&](int t, const R* Sp, R* Snew) {
    const std::size_t b = std::size_t(t) * d;
    for (int i = 0; i < d; ++i) kf[i] = phi(k[b + i]);
    nk = std::sqrt(dot(kf.data(), kf.data()));
    beta = gated ? R(1) / (R(1) + R(std::exp(-gate[t]))) : R(1);
    for (int i = 0; i < d; ++i) kh[i] = deltanet ? (nk == R(0) ? kf[i] : kf[i] / nk) : kf[i];
    for (int i = 0; i < d; ++i) e[i] = deltanet ? v[b + i] - dot(&Sp[std::size_t(i) * d], kh.data()) : v[b + i];
    for (std::size_t x = 0; x < dd; ++x) Snew[x] = beta * Sp[x] + e[x / d] * kh[x % d];
  };
  o.assign(N, R(0));
  for (int t = 0; t < T; ++t) {
    const std::size_t b = std::size_t(t) * d;
    std::copy(S.begin(), S.end(), Sprev.begin() + t * dd);
    step(t, &Sprev[t * dd], S.data());
    for (int i = 0; i < d; ++i) { zs[i] += kf[i]; zsv[b + i] = zs[i]; }
    read.forward(S.data(), zs.data(), &q[b], &o[b]);
  }
  dq.assign(N, R(0)); dk.assign(N, R(0)); dv.assign(N, R(0)); dgate.assign(gated ? T : 0, R(0));
  std::vector<R> dS(dd, R(0)), dzs(d, R(0)), de(d), dkh(d), tmp(d);
  for (int t = T - 1; t >= 0; --t) {
    const std::size_t b = std::size_t(t) * d;
    const R* Sp = &Sprev[t * dd];
    step(t, Sp, St.data());
    read.backward(St.data(), &zsv[b], &q[b], &o[b], &dout[b], dS.data(), dzs.data(), &dq[b]);
    for (int i = 0; i < d; ++i) de[i] = dot(&dS[std::size_t(i) * d], kh.data());
    matvec_t(d, dS.data(), e.data(), dkh.data());
    for (int i = 0; i < d; ++i) dv[b + i] = de[i];
    if (!deltanet) {
      for (int i = 0; i < d; ++i) dk[b + i] = (dzs[i] + dkh[i]) * dphi(k[b + i]);
      continue;
    }
    matvec_t(d, Sp, de.data(), tmp.data());
    for (int j = 0; j < d; ++j) dkh[j] -= tmp[j];
    R dbeta = 0;
    for (std::size_t x = 0; x < dd; ++x) dbeta += dS[x] * Sp[x];
    if (gated) dgate[t] = dbeta * beta * (R(1) - beta);
    for (std::size_t x = 0; x < dd; ++x) dS[x] = beta * dS[x] - de[x / d] * kh[x % d];
    const R khdkh = dot(kh.data(), dkh.data());
    for (int i = 0; i < d; ++i) {
      const R dkf = dzs[i] + (nk == R(0) ? R(0) : (dkh[i] - kh[i] * khdkh) / nk);
      dk[b + i] = dkf * dphi(k[b + i]);
    }
  }
}

}  // namespace vla::gpu::ref
