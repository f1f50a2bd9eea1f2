#pragma once
// Plain CPU reference of the VLA backward pass (Algorithm 1, "vla" preset, rank 1, delta clamp), one
// (b, h) sequence at a time, templated on the scalar (double in the tests), llm.c style: loops over
// std::vector, no Eigen, so it reads line by line against the CUDA kernel (gpu/recurrent_backward.cu).
// The forward is re-run here and every S_{t-1}, A_{t-1} kept: this is a reference, memory is O(T d^2).
//
// Forward, per step t (Alg. 1 line numbers; s = 1/sqrt(d)):
//   kf = phi(k_raw) (8)   nk = ||kf||, k_hat = kf / nk (9)   nu = ||u_raw||, u = u_raw s / nu (10)
//   z = A_{t-1} u, delta = 1 + u.z (12)   dc = delta >= eps ? delta : eps (13)
//   A_t = A_{t-1} - z z^T / dc (14)  [+ eta I when (t+1) % period == 0 (16)]
//   alpha = A_t k_hat (19)   na = ||alpha||, ah = alpha / na (20)
//   e = v - S_{t-1} k_hat (21)   S_t = S_{t-1} + e ah^T (22)
//   qf = phi(q_raw) (24)   zs_t = zs_{t-1} + kf (25)   r = zs_t.qf, den = r < eps ? eps : r
//   o = S_t qf / den (26)
//
// Adjoint equations (reverse order of the forward; dS, dA, dzs are the adjoints of S_t, A_t, zs_t
// carried back from step t+1, zero after the last step; "g" = do / den):
//   read (26):    gpu/read_backward_reference.hpp (adds to dS and dzs, gives dq_raw)
//   (25):         dkf = dzs                                 (dzs is then also the adjoint of zs_{t-1})
//   (22):         de = dS ah;  dah = dS^T e                  (dS passes to S_{t-1} unchanged)
//   (21):         dv = de;  dS -= de k_hat^T;  dkh = -S_{t-1}^T de
//   (20):         dalpha = (dah - ah (ah.dah)) / na          (0 when na = 0: unit() keeps 0 at 0)
//   (19):         dA += dalpha k_hat^T;  dkh += A_t^T dalpha
//   (14, 16):     dz = -(dA + dA^T) z / dc;  ddc = z^T dA z / dc^2   (eta I is a constant: no gradient;
//                 dA passes to A_{t-1} unchanged)
//   (13):         ddelta = delta >= eps ? ddc : 0            (clamped branch: dc = eps is constant)
//   (12):         du = ddelta z;  dz += ddelta u;  dA += dz u^T;  du += A_{t-1}^T dz
//   (10):         du_raw = (s / nu) (du - uh (uh.du)),  uh = u_raw / nu
//   (9):          dkf += (dkh - k_hat (k_hat.dkh)) / nk
//   (8):          dk_raw = dkf * phi'(k_raw)
// A_t is symmetric in exact arithmetic, but the adjoints above use the transposes as written, so
// the reference is the exact derivative of the rounded-free function, whatever the rounding.
#include "gpu/read_backward_reference.hpp"  // phi, dphi, dot, matvec_t, the read (26) and its adjoint

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace vla::gpu::ref {

struct VlaHyper {  // as gpu::RecurrentParams / core PenaltyOptions (defaults = Algorithm 1's)
  double eps = 1e-4, lambda0 = 0.1, refresh_eta = 1e-3;
  int refresh_period = 20;
};

// One sequence. Inputs q, k, v, u: (T, d) row-major (token t at t*d); dout: (T, d).
// Outputs (resized): o (T, d) the forward output, dq, dk, dv, du (T, d) the gradients of
// L = sum(dout * o) with respect to q_raw, k_raw, v, u_raw.
template <class R>
void vla_backward(int T, int d, const std::vector<R>& q, const std::vector<R>& k, const std::vector<R>& v,
                  const std::vector<R>& u, const std::vector<R>& dout, std::vector<R>& o, std::vector<R>& dq,
                  std::vector<R>& dk, std::vector<R>& dv, std::vector<R>& du, const VlaHyper& hp = {}) {
  const std::size_t dd = std::size_t(d) * d, N = std::size_t(T) * d;
  const R eps = R(hp.eps), s = R(1) / std::sqrt(R(d));
  auto dot = [d](const R* a, const R* b) { return ref::dot(d, a, b); };
  Read<R> read(d, eps);
  // Per-step forward quantities kept for the reverse pass.
  std::vector<R> Sprev(N * d), Aprev(N * d), zsv(N);  // S_{t-1}, A_{t-1}: (T, d, d); zs_t: (T, d)
  std::vector<R> S(dd, R(0)), A(dd, R(0)), zs(d, R(0));
  for (int i = 0; i < d; ++i) A[std::size_t(i) * d + i] = R(1) / R(hp.lambda0);  // A_0 = I / lambda0 (line 4)
  std::vector<R> kf(d), kh(d), uu(d), z(d), al(d), ah(d), e(d);
  R nk, nu, delta, dc, na;
  // Step t's writes (lines 8-22) from S_{t-1}, A_{t-1} (Sp, Ap): the vectors above, and S_t, A_t
  // into St, At (which must not alias Sp, Ap). The forward and the reverse pass both call it, so the
  // reverse pass recomputes exactly what the forward computed.
  auto step = [&](int t, const R* Sp, const R* Ap, R* St, R* At) {
    const std::size_t b = std::size_t(t) * d;
    for (int i = 0; i < d; ++i) kf[i] = phi(k[b + i]);
    nk = std::sqrt(dot(kf.data(), kf.data()));
    for (int i = 0; i < d; ++i) kh[i] = nk == R(0) ? kf[i] : kf[i] / nk;
    nu = std::sqrt(dot(&u[b], &u[b]));
    for (int i = 0; i < d; ++i) uu[i] = nu == R(0) ? R(0) : u[b + i] * s / nu;
    for (int i = 0; i < d; ++i) z[i] = dot(&Ap[std::size_t(i) * d], uu.data());
    delta = R(1) + dot(uu.data(), z.data());
    dc = delta >= eps ? delta : eps;
    for (std::size_t x = 0; x < dd; ++x) At[x] = Ap[x] - z[x / d] * z[x % d] / dc;
    if (hp.refresh_period > 0 && (t + 1) % hp.refresh_period == 0)
      for (int i = 0; i < d; ++i) At[std::size_t(i) * d + i] += R(hp.refresh_eta);
    for (int i = 0; i < d; ++i) al[i] = dot(&At[std::size_t(i) * d], kh.data());
    na = std::sqrt(dot(al.data(), al.data()));
    for (int i = 0; i < d; ++i) ah[i] = na == R(0) ? R(0) : al[i] / na;
    for (int i = 0; i < d; ++i) e[i] = v[b + i] - dot(&Sp[std::size_t(i) * d], kh.data());
    for (std::size_t x = 0; x < dd; ++x) St[x] = Sp[x] + e[x / d] * ah[x % d];
  };
  o.assign(N, R(0));
  for (int t = 0; t < T; ++t) {
    const std::size_t b = std::size_t(t) * d;
    std::copy(S.begin(), S.end(), Sprev.begin() + t * dd);
    std::copy(A.begin(), A.end(), Aprev.begin() + t * dd);
    step(t, &Sprev[t * dd], &Aprev[t * dd], S.data(), A.data());
    for (int i = 0; i < d; ++i) { zs[i] += kf[i]; zsv[b + i] = zs[i]; }
    read.forward(S.data(), zs.data(), &q[b], &o[b]);
  }

  dq.assign(N, R(0)); dk.assign(N, R(0)); dv.assign(N, R(0)); du.assign(N, R(0));
  std::vector<R> dS(dd, R(0)), dA(dd, R(0)), dzs(d, R(0));
  std::vector<R> St(dd), At(dd), dkf(d), de(d), dah(d), dkh(d), dal(d), dz(d), duu(d), tmp(d);
  for (int t = T - 1; t >= 0; --t) {
    const std::size_t b = std::size_t(t) * d;
    const R* Sp = &Sprev[t * dd];
    const R* Ap = &Aprev[t * dd];
    step(t, Sp, Ap, St.data(), At.data());

    // (26) read
    read.backward(St.data(), &zsv[b], &q[b], &o[b], &dout[b], dS.data(), dzs.data(), &dq[b]);
    // (25)
    for (int i = 0; i < d; ++i) dkf[i] = dzs[i];
    // (22)
    for (int i = 0; i < d; ++i) de[i] = dot(&dS[std::size_t(i) * d], ah.data());
    matvec_t(d, dS.data(), e.data(), dah.data());
    // (21)
    for (int i = 0; i < d; ++i) dv[b + i] = de[i];
    for (std::size_t x = 0; x < dd; ++x) dS[x] -= de[x / d] * kh[x % d];
    matvec_t(d, Sp, de.data(), dkh.data());
    for (int j = 0; j < d; ++j) dkh[j] = -dkh[j];
    // (20)
    const R ahdah = dot(ah.data(), dah.data());
    for (int i = 0; i < d; ++i) dal[i] = na == R(0) ? R(0) : (dah[i] - ah[i] * ahdah) / na;
    // (19)
    for (std::size_t x = 0; x < dd; ++x) dA[x] += dal[x / d] * kh[x % d];
    matvec_t(d, At.data(), dal.data(), tmp.data());
    for (int j = 0; j < d; ++j) dkh[j] += tmp[j];
    // (14, 16)
    R zdAz = 0;
    for (int i = 0; i < d; ++i) {
      R acc = 0;
      for (int j = 0; j < d; ++j) acc += (dA[std::size_t(i) * d + j] + dA[std::size_t(j) * d + i]) * z[j];
      dz[i] = -acc / dc;
      zdAz += z[i] * dot(&dA[std::size_t(i) * d], z.data());
    }
    // (13), (12)
    const R ddelta = delta >= eps ? zdAz / (dc * dc) : R(0);
    for (int i = 0; i < d; ++i) { duu[i] = ddelta * z[i]; dz[i] += ddelta * uu[i]; }
    for (std::size_t x = 0; x < dd; ++x) dA[x] += dz[x / d] * uu[x % d];
    matvec_t(d, Ap, dz.data(), tmp.data());
    for (int j = 0; j < d; ++j) duu[j] += tmp[j];
    // (10)
    if (nu != R(0)) {
      R uhdu = 0;
      for (int i = 0; i < d; ++i) uhdu += u[b + i] / nu * duu[i];
      for (int i = 0; i < d; ++i) du[b + i] = s / nu * (duu[i] - u[b + i] / nu * uhdu);
    }
    // (9), (8)
    const R khdkh = dot(kh.data(), dkh.data());
    for (int i = 0; i < d; ++i) {
      if (nk != R(0)) dkf[i] += (dkh[i] - kh[i] * khdkh) / nk;
      dk[b + i] = dkf[i] * dphi(k[b + i]);
    }
  }
}

}  // namespace vla::gpu::ref
