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
//   read:     dS += g qf^T;  dqf = S_t^T g;  unclamped den: c = -(g.o), dqf += c zs_t, dzs += c qf
//   linear:   dv = dS kf;  dkf = dzs + dS^T v;  dS passes to S_{t-1} unchanged
//   DeltaNet: de = dS kh;  dv = de;  dkh = dS^T e - S_{t-1}^T de;  dbeta = <dS, S_{t-1}>_F;
//             dg = dbeta beta (1 - beta);  dS <- beta dS - de kh^T (adjoint of S_{t-1});
//             dkf = dzs + (dkh - kh (kh.dkh)) / ||kf||
//   dq_raw = dqf phi'(q_raw), dk_raw = dkf phi'(k_raw)
#include "gpu/vla_backward_reference.hpp"  // phi, dphi

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
  auto dot = [d](const R* a, const R* b) { R acc = 0; for (int i = 0; i < d; ++i) acc += a[i] * b[i]; return acc; };
  std::vector<R> Sprev(N * d), zsv(N), S(dd, R(0)), zs(d, R(0)), kf(d), kh(d), e(d), qf(d), St(dd);
  auto step_vals = [&](int t, const R* Sp, R& nk, R& beta) {  // kf, kh, e, beta of step t from S_{t-1}
    const std::size_t b = std::size_t(t) * d;
    for (int i = 0; i < d; ++i) kf[i] = phi(k[b + i]);
    nk = std::sqrt(dot(kf.data(), kf.data()));
    beta = gated ? R(1) / (R(1) + R(std::exp(-gate[t]))) : R(1);
    for (int i = 0; i < d; ++i) kh[i] = deltanet ? (nk == R(0) ? kf[i] : kf[i] / nk) : kf[i];
    for (int i = 0; i < d; ++i) e[i] = deltanet ? v[b + i] - dot(&Sp[std::size_t(i) * d], kh.data()) : v[b + i];
  };
  o.assign(N, R(0));
  for (int t = 0; t < T; ++t) {
    const std::size_t b = std::size_t(t) * d;
    std::copy(S.begin(), S.end(), Sprev.begin() + t * dd);
    R nk, beta;
    step_vals(t, S.data(), nk, beta);
    for (std::size_t x = 0; x < dd; ++x) S[x] = beta * S[x] + e[x / d] * kh[x % d];
    for (int i = 0; i < d; ++i) { zs[i] += kf[i]; zsv[b + i] = zs[i]; qf[i] = phi(q[b + i]); }
    const R r = dot(zs.data(), qf.data()), den = r < eps ? eps : r;
    for (int i = 0; i < d; ++i) o[b + i] = dot(&S[std::size_t(i) * d], qf.data()) / den;
  }
  dq.assign(N, R(0)); dk.assign(N, R(0)); dv.assign(N, R(0)); dgate.assign(gated ? T : 0, R(0));
  std::vector<R> dS(dd, R(0)), dzs(d, R(0)), g(d), dqf(d), de(d), dkh(d);
  for (int t = T - 1; t >= 0; --t) {
    const std::size_t b = std::size_t(t) * d;
    const R* Sp = &Sprev[t * dd];
    R nk, beta;
    step_vals(t, Sp, nk, beta);
    for (std::size_t x = 0; x < dd; ++x) St[x] = beta * Sp[x] + e[x / d] * kh[x % d];
    for (int i = 0; i < d; ++i) qf[i] = phi(q[b + i]);
    const R r = dot(&zsv[b], qf.data()), den = r < eps ? eps : r;
    for (int i = 0; i < d; ++i) g[i] = dout[b + i] / den;
    for (int j = 0; j < d; ++j) { R acc = 0; for (int i = 0; i < d; ++i) acc += St[std::size_t(i) * d + j] * g[i]; dqf[j] = acc; }
    for (std::size_t x = 0; x < dd; ++x) dS[x] += g[x / d] * qf[x % d];
    if (!(r < eps)) {
      const R c = -dot(g.data(), &o[b]);
      for (int i = 0; i < d; ++i) { dqf[i] += c * zsv[b + i]; dzs[i] += c * qf[i]; }
    }
    for (int i = 0; i < d; ++i) dq[b + i] = dqf[i] * dphi(q[b + i]);
    for (int i = 0; i < d; ++i) de[i] = dot(&dS[std::size_t(i) * d], kh.data());
    for (int j = 0; j < d; ++j) { R acc = 0; for (int i = 0; i < d; ++i) acc += dS[std::size_t(i) * d + j] * e[i]; dkh[j] = acc; }
    for (int i = 0; i < d; ++i) dv[b + i] = de[i];
    if (!deltanet) {
      for (int i = 0; i < d; ++i) dk[b + i] = (dzs[i] + dkh[i]) * dphi(k[b + i]);
      continue;
    }
    for (int j = 0; j < d; ++j) { R acc = 0; for (int i = 0; i < d; ++i) acc += Sp[std::size_t(i) * d + j] * de[i]; dkh[j] -= acc; }
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
