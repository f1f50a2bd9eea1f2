// Fused fp32 backward of the VLA recurrence; contract in gpu/recurrent_backward.hpp, adjoint equations
// (derived line by line from Algorithm 1) and the CPU double reference in gpu/vla_backward_reference.hpp.
//
// What the reverse pass needs. Step t's adjoints use S_{t-1} and A_{t-1} (mat-vecs with vectors that
// exist only in the backward: S_{t-1}^T de, A_{t-1}^T dz, A_t^T dalpha, S_t^T g). Two ways to get them:
//  - invert the steps: A_{t-1} = A_t - eta I + z z^T / dc and S_{t-1} = S_t - e ah^T. Rejected:
//    when dc is small (the delta clamp's regime) z z^T / dc is large and A_t is the small difference
//    of two large matrices, so adding it back cancels catastrophically, and the rounding of every
//    undone step accumulates over T; running Sherman-Morrison backwards is unstable.
//  - recompute from checkpoints (chosen, the standard choice): a forward pass stores (S, A, zs) every
//    CH = kBackwardChunk steps; then, chunk by chunk from the last, the chunk's forward is re-run from
//    its checkpoint, writing each step's (S_{t-1}, A_{t-1}, zs_{t-1}) to a per-block scratch of CH
//    slots, and the reverse steps read them back. Every state is the forward's own rounding, the
//    cost is two forward passes plus the reverse, and the scratch is O(T/CH + CH) states per
//    sequence (CH = 32: at d = 64 the chunk scratch is 1 MB per block, L2-resident on an H100).
//
// Parallel structure. One block per (b, h), d threads; thread j owns element j of every per-token
// vector and column j of S, A, dS, dA for rank-1 updates (M += a b^T touches M[:, j] only in thread j,
// so updates need no atomics). The four matrices live in shared memory with row stride d+1, so that
// both a row walk (thread j reads M[j][c], mat-vec M x) and a column walk (M[c][j], M^T x) hit 32
// distinct banks. All dot products are block sums through one shared buffer (every thread adds the d
// partials in the same order, so all threads hold bitwise the same scalar). This is the simple,
// race-free form; it is not yet tuned (docs/gpu.md gives its measured cost against the forward).
#include "gpu/recurrent_backward.hpp"

namespace vla::gpu {
namespace {

__device__ __forceinline__ float phi(float x) { return x > 0.f ? x + 1.f : expf(x); }   // Alg. 1 lines 8, 24
__device__ __forceinline__ float dphi(float x) { return x > 0.f ? 1.f : expf(x); }       // phi'

template <int D> struct Smem {
  static constexpr int LD = D + 1, MAT = D * LD, NRED = 2;
  // S, A (the state at step t-1), dS, dA (adjoints of S_t, A_t), 11 shared vectors, the sum buffer.
  static constexpr int FLOATS = 4 * MAT + 11 * D + NRED * D;
  static constexpr std::size_t BYTES = FLOATS * sizeof(float);
};

// Dot products over d with 4 independent accumulators: the FMA chain is d/4 long, not d (the
// kernel is latency-bound; see docs/gpu.md).
template <int D> __device__ __forceinline__ float row_dot(const float* M, int j, const float* x) {
  float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
#pragma unroll 4
  for (int c = 0; c < D; c += 4) {
    a0 = fmaf(M[j * Smem<D>::LD + c], x[c], a0);
    a1 = fmaf(M[j * Smem<D>::LD + c + 1], x[c + 1], a1);
    a2 = fmaf(M[j * Smem<D>::LD + c + 2], x[c + 2], a2);
    a3 = fmaf(M[j * Smem<D>::LD + c + 3], x[c + 3], a3);
  }
  return (a0 + a1) + (a2 + a3);
}
template <int D> __device__ __forceinline__ float col_dot(const float* M, int j, const float* x) {
  float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
#pragma unroll 4
  for (int c = 0; c < D; c += 4) {
    a0 = fmaf(M[c * Smem<D>::LD + j], x[c], a0);
    a1 = fmaf(M[(c + 1) * Smem<D>::LD + j], x[c + 1], a1);
    a2 = fmaf(M[(c + 2) * Smem<D>::LD + j], x[c + 2], a2);
    a3 = fmaf(M[(c + 3) * Smem<D>::LD + j], x[c + 3], a3);
  }
  return (a0 + a1) + (a2 + a3);
}
// Column j of M += a b_j (thread j's share of the rank-1 update M += a b^T).
template <int D> __device__ __forceinline__ void col_axpy(float* M, int j, const float* a, float bj) {
#pragma unroll 8
  for (int c = 0; c < D; ++c) M[c * Smem<D>::LD + j] = fmaf(a[c], bj, M[c * Smem<D>::LD + j]);
}

// N block-wide sums (N <= NRED); a barrier before (publishes the caller's shared writes) and after
// (the buffer can be reused at once).
template <int D, int N> __device__ __forceinline__ void block_sums(float (&x)[N], float* red) {
  static_assert(N <= Smem<D>::NRED);
  const int j = threadIdx.x;
#pragma unroll
  for (int n = 0; n < N; ++n) red[n * D + j] = x[n];
  __syncthreads();
#pragma unroll
  for (int n = 0; n < N; ++n) {
    float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;  // 4 chains, as the dots
#pragma unroll
    for (int c = 0; c < D; c += 4) {
      s0 += red[n * D + c];
      s1 += red[n * D + c + 1];
      s2 += red[n * D + c + 2];
      s3 += red[n * D + c + 3];
    }
    x[n] = (s0 + s1) + (s2 + s3);
  }
  __syncthreads();
}

// Column j of the state to / from one scratch slot (S, A: d x d row-major, then zs: d). Thread j
// moves only its own column, which only it writes, so a save needs no barrier of its own.
template <int D, bool WITH_A = true>
__device__ __forceinline__ void save(float* slot, const float* S, const float* A, float zs) {
  const int j = threadIdx.x;
  for (int c = 0; c < D; ++c) {
    slot[c * D + j] = S[c * Smem<D>::LD + j];
    if constexpr (WITH_A) slot[D * D + c * D + j] = A[c * Smem<D>::LD + j];
  }
  slot[2 * D * D + j] = zs;
}
// A slot's column j held in registers (fully unrolled: 2d + 1 registers), so that the reverse pass
// can issue step t-1's loads at the top of step t and have them land while step t computes: one
// L2 round trip per step, overlapped, instead of 2d dependent ones.
template <int D, bool WITH_A = true> struct SlotRegs {
  float r[2 * D + 1];
  __device__ __forceinline__ void fetch(const float* slot) {
    const int j = threadIdx.x;
#pragma unroll
    for (int c = 0; c < D; ++c) {
      r[c] = slot[c * D + j];
      if constexpr (WITH_A) r[D + c] = slot[D * D + c * D + j];
    }
    r[2 * D] = slot[2 * D * D + j];
  }
  __device__ __forceinline__ float commit(float* S, float* A) const {
    const int j = threadIdx.x;
#pragma unroll
    for (int c = 0; c < D; ++c) {
      S[c * Smem<D>::LD + j] = r[c];
      if constexpr (WITH_A) A[c * Smem<D>::LD + j] = r[D + c];
    }
    return r[2 * D];
  }
};

// Step t's forward quantities from S = S_{t-1}, A = A_{t-1} (Alg. 1 lines 8-21), thread j's share.
struct StepVals { float kf, nk, kh, nu, uu, z, delta, dc, eta, ah, na, e; };

template <int D>
__device__ __forceinline__ StepVals prelude(int t, float kr, float ur, float vr, const float* S, const float* A,
                                            float* sh_kh, float* sh_uu, float* sh_z, float* sh_ah, float* sh_e,
                                            float* red, const RecurrentParams& prm) {
  const int j = threadIdx.x;
  StepVals s;
  s.kf = phi(kr);                                                      // line 8
  float r1[2] = {s.kf * s.kf, ur * ur};
  block_sums<D, 2>(r1, red);  // also the step's opening barrier: every earlier reader of sh_* is done
  s.nk = sqrtf(r1[0]);
  s.nu = sqrtf(r1[1]);
  s.kh = s.nk == 0.f ? s.kf : s.kf / s.nk;                             // line 9
  s.uu = s.nu == 0.f ? 0.f : ur * (rsqrtf(float(D)) / s.nu);           // line 10
  sh_kh[j] = s.kh;
  sh_uu[j] = s.uu;
  __syncthreads();
  s.z = row_dot<D>(A, j, sh_uu);                                       // z = A_{t-1} u (line 12)
  const float Akh = row_dot<D>(A, j, sh_kh), Skh = row_dot<D>(S, j, sh_kh);
  sh_z[j] = s.z;
  float r2[2] = {s.uu * s.z, s.z * s.kh};
  block_sums<D, 2>(r2, red);
  s.delta = 1.f + r2[0];                                               // line 12
  s.dc = s.delta >= prm.eps ? s.delta : prm.eps;                      // line 13 (NaN -> eps, as the CPU rule)
  s.eta = (prm.refresh_period > 0 && (t + 1) % prm.refresh_period == 0) ? prm.refresh_eta : 0.f;  // line 16
  const float al = Akh - s.z * (r2[1] / s.dc) + s.eta * s.kh;         // alpha = A_t k_hat (lines 14, 16, 19)
  s.e = vr - Skh;                                                      // line 21
  float r3[1] = {al * al};
  block_sums<D, 1>(r3, red);
  s.na = sqrtf(r3[0]);
  s.ah = s.na == 0.f ? 0.f : al / s.na;                                // line 20
  sh_ah[j] = s.ah;
  sh_e[j] = s.e;
  __syncthreads();
  return s;
}

// Forward update of the state (lines 14, 16, 22, 25), thread j's column.
template <int D>
__device__ __forceinline__ void advance(const StepVals& s, float* S, float* A, float& zs, const float* sh_z,
                                        const float* sh_e) {
  const int j = threadIdx.x;
  col_axpy<D>(A, j, sh_z, -s.z / s.dc);   // A -= z z^T / dc
  A[j * Smem<D>::LD + j] += s.eta;         // refresh
  col_axpy<D>(S, j, sh_e, s.ah);           // S += e ah^T
  zs += s.kf;
}

template <int D>
__global__ void __launch_bounds__(D) vla_backward_kernel(const RecurrentTensors x, const RecurrentGrads g,
                                                         const RecurrentParams prm, float* workspace) {
  using M = Smem<D>;
  constexpr int CH = kBackwardChunk, SLOT = 2 * D * D + D;
  extern __shared__ __align__(16) float sm[];
  float* S = sm;
  float* A = S + M::MAT;
  float* dS = A + M::MAT;
  float* dA = dS + M::MAT;
  float* sh_kh = dA + M::MAT;
  float* sh_uu = sh_kh + D;
  float* sh_z = sh_uu + D;
  float* sh_ah = sh_z + D;
  float* sh_e = sh_ah + D;
  float* sh_qf = sh_e + D;
  float* sh_g = sh_qf + D;
  float* sh_de = sh_g + D;
  float* sh_dal = sh_de + D;
  float* sh_dz = sh_dal + D;
  float* red = sh_dz + 2 * D;

  const int j = threadIdx.x, T = x.T;
  const long long seq = blockIdx.x;
  const long long base = seq * T * D;
  const int chunks = (T + CH - 1) / CH;
  float* ck = workspace + seq * (long long)(chunks + CH) * SLOT;  // chunks checkpoints, then CH scratch slots
  float* scratch = ck + (long long)chunks * SLOT;

  // S_0 = 0, A_0 = I / lambda0 (line 4); adjoints zero after the last step.
  for (int c = 0; c < D; ++c) {
    S[c * M::LD + j] = 0.f;
    A[c * M::LD + j] = c == j ? 1.f / prm.lambda0 : 0.f;
    dS[c * M::LD + j] = 0.f;
    dA[c * M::LD + j] = 0.f;
  }
  float zs = 0.f, dzs = 0.f;
  __syncthreads();

  // Pass 1: forward, checkpoint (S_{t-1}, A_{t-1}, zs_{t-1}) before every CH-th step.
  // Token inputs are read one step ahead (they do not depend on the state), so their global-load
  // latency overlaps the step, as in the forward kernel.
  auto in3 = [&](int t, float& kr, float& ur, float& vr) {
    const long long o = base + (long long)t * D + j;
    kr = x.k[o]; ur = x.u[o]; vr = x.v[o];
  };
  float kn, un, vn;
  in3(0, kn, un, vn);
  for (int t = 0; t < T; ++t) {
    const float kr = kn, ur = un, vr = vn;
    if (t + 1 < T) in3(t + 1, kn, un, vn);
    if (t % CH == 0) save<D>(ck + (long long)(t / CH) * SLOT, S, A, zs);
    const StepVals s = prelude<D>(t, kr, ur, vr, S, A, sh_kh, sh_uu, sh_z, sh_ah, sh_e, red, prm);
    advance<D>(s, S, A, zs, sh_z, sh_e);
  }

  // Pass 2: chunks from the last; recompute the chunk's states into scratch, then reverse through it.
  for (int c = chunks - 1; c >= 0; --c) {
    const int t0 = c * CH, t1 = min(T, t0 + CH);
    SlotRegs<D> regs;
    regs.fetch(ck + (long long)c * SLOT);
    __syncthreads();  // every reader of S, A from the previous chunk's reverse steps is done
    zs = regs.commit(S, A);
    __syncthreads();
    in3(t0, kn, un, vn);
    for (int t = t0; t < t1; ++t) {
      const float kr = kn, ur = un, vr = vn;
      if (t + 1 < t1) in3(t + 1, kn, un, vn);
      save<D>(scratch + (long long)(t - t0) * SLOT, S, A, zs);
      const StepVals s = prelude<D>(t, kr, ur, vr, S, A, sh_kh, sh_uu, sh_z, sh_ah, sh_e, red, prm);
      advance<D>(s, S, A, zs, sh_z, sh_e);
    }
    regs.fetch(scratch + (long long)(t1 - 1 - t0) * SLOT);
    float qn, dn;
    auto in5 = [&](int t) { in3(t, kn, un, vn); const long long o = base + (long long)t * D + j; qn = x.q[o]; dn = g.dout[o]; };
    in5(t1 - 1);
    for (int t = t1 - 1; t >= t0; --t) {
      const long long o = base + (long long)t * D + j;
      const float kr = kn, ur = un, vr = vn, qr = qn, dor = dn;
      __syncthreads();  // the previous reverse step's readers of S, A are done
      zs = regs.commit(S, A);                                       // S_{t-1}, A_{t-1}, zs_{t-1}
      if (t > t0) {                                                 // step t-1's, in flight during step t
        regs.fetch(scratch + (long long)(t - 1 - t0) * SLOT);
        in5(t - 1);
      }
      const StepVals s = prelude<D>(t, kr, ur, vr, S, A, sh_kh, sh_uu, sh_z, sh_ah, sh_e, red, prm);

      // Read (line 26): o = S_t qf / den with S_t qf = S_{t-1} qf + e (ah.qf).
      const float qf = phi(qr), zst = zs + s.kf;                       // lines 24, 25
      sh_qf[j] = qf;
      __syncthreads();
      const float Sq = row_dot<D>(S, j, sh_qf);
      float r4[2] = {zst * qf, s.ah * qf};
      block_sums<D, 2>(r4, red);
      const float den = r4[0] < prm.eps ? prm.eps : r4[0];
      const float o_j = (Sq + s.e * r4[1]) / den;
      const float gj = dor / den;                                      // g = do / den
      sh_g[j] = gj;
      float r5[2] = {gj * o_j, s.e * gj};
      block_sums<D, 2>(r5, red);
      float dqf = col_dot<D>(S, j, sh_g) + s.ah * r5[1];               // S_t^T g
      if (!(r4[0] < prm.eps)) {                                        // unclamped denominator only
        dqf -= r5[0] * zst;
        dzs -= r5[0] * qf;
      }
      g.dq[o] = dqf * dphi(qr);
      col_axpy<D>(dS, j, sh_g, qf);                                    // dS += g qf^T
      float dkf = dzs;                                                 // line 25
      __syncthreads();

      // Line 22: de = dS ah, dah = dS^T e;  line 21: dv = de, dS -= de kh^T, dkh = -S_{t-1}^T de.
      const float de = row_dot<D>(dS, j, sh_ah), dah = col_dot<D>(dS, j, sh_e);
      sh_de[j] = de;
      float r6[1] = {s.ah * dah};
      block_sums<D, 1>(r6, red);  // all reads of dS done before the update below
      g.dv[o] = de;
      col_axpy<D>(dS, j, sh_de, -s.kh);
      float dkh = -col_dot<D>(S, j, sh_de);
      // Line 20: dalpha = (dah - ah (ah.dah)) / na;  line 19: dA += dalpha kh^T, dkh += A_t^T dalpha.
      const float dal = s.na == 0.f ? 0.f : (dah - s.ah * r6[0]) / s.na;
      sh_dal[j] = dal;
      __syncthreads();
      col_axpy<D>(dA, j, sh_dal, s.kh);
      float r7[1] = {s.z * dal};
      block_sums<D, 1>(r7, red);  // also orders the dA update before the dA reads below
      dkh += col_dot<D>(A, j, sh_dal) - s.z * (r7[0] / s.dc) + s.eta * dal;  // A_t^T dalpha
      // Lines 14, 16: dz = -(dA + dA^T) z / dc, ddc = z^T dA z / dc^2; line 13: zero if clamped.
      const float rowz = row_dot<D>(dA, j, sh_z), colz = col_dot<D>(dA, j, sh_z);
      float dz = -(rowz + colz) / s.dc;
      float r8[1] = {s.z * rowz};
      block_sums<D, 1>(r8, red);
      const float ddelta = s.delta >= prm.eps ? r8[0] / (s.dc * s.dc) : 0.f;
      // Line 12: du = ddelta z + A_{t-1}^T dz, dz += ddelta u, dA += dz u^T.
      float du = ddelta * s.z;
      dz += ddelta * s.uu;
      sh_dz[j] = dz;
      __syncthreads();
      col_axpy<D>(dA, j, sh_dz, s.uu);
      du += col_dot<D>(A, j, sh_dz);
      // Line 10: du_raw = (s / nu)(du - uh (uh.du));  line 9: dkf += (dkh - kh (kh.dkh)) / nk;  line 8.
      float r9[2] = {ur * du, s.kh * dkh};
      block_sums<D, 2>(r9, red);
      g.du[o] = s.nu == 0.f ? 0.f : (rsqrtf(float(D)) / s.nu) * (du - ur * (r9[0] / (s.nu * s.nu)));
      if (s.nk != 0.f) dkf += (dkh - s.kh * r9[1]) / s.nk;
      g.dk[o] = dkf * dphi(kr);
    }
  }
}


// Linear attention (DELTA = false) and DeltaNet (DELTA = true): the same two passes and layout with S
// alone (no A; the slots' A half is unused). Adjoints: gpu/delta_backward_reference.hpp.
template <bool DELTA, int D>
__global__ void __launch_bounds__(D) delta_backward_kernel(const RecurrentTensors x, const RecurrentGrads g,
                                                           const RecurrentParams prm, float* workspace) {
  using M = Smem<D>;
  constexpr int CH = kBackwardChunk, SLOT = 2 * D * D + D;
  extern __shared__ __align__(16) float sm[];
  float* S = sm;
  float* dS = S + 2 * M::MAT;
  float* sh_kh = dS + 2 * M::MAT;
  float* sh_e = sh_kh + D;
  float* sh_qf = sh_e + D;
  float* sh_g = sh_qf + D;
  float* sh_de = sh_g + D;
  float* red = sh_de + 6 * D;

  const int j = threadIdx.x, T = x.T;
  const long long seq = blockIdx.x;
  const long long base = seq * T * D;
  const int chunks = (T + CH - 1) / CH;
  float* ck = workspace + seq * (long long)(chunks + CH) * SLOT;
  float* scratch = ck + (long long)chunks * SLOT;
  const bool gated = DELTA && x.g;
  for (int c = 0; c < D; ++c) { S[c * M::LD + j] = 0.f; dS[c * M::LD + j] = 0.f; }
  float zs = 0.f, dzs = 0.f;
  __syncthreads();

  struct Vals { float kf, nk, kh, beta, e; };
  // Step t's kf, k_hat, beta, e from S = S_{t-1}; publishes sh_kh (the write key) and sh_e.
  auto prelude = [&](int t, float kr, float vr) {
    Vals s;
    s.kf = phi(kr);
    float r1[1] = {s.kf * s.kf};
    block_sums<D, 1>(r1, red);  // also the step's opening barrier
    s.nk = sqrtf(r1[0]);
    s.beta = gated ? 1.f / (1.f + expf(-x.g[seq * T + t])) : 1.f;  // beta_t = sigmoid(g_t) (eq. 4)
    if constexpr (DELTA) {
      s.kh = s.nk == 0.f ? s.kf : s.kf / s.nk;
      sh_kh[j] = s.kh;
      __syncthreads();
      s.e = vr - row_dot<D>(S, j, sh_kh);  // e = v - S_{t-1} k_hat
    } else {
      s.kh = s.kf;  // linear attention writes v phi(k)^T (eq. 3)
      s.e = vr;
      sh_kh[j] = s.kh;
    }
    sh_e[j] = s.e;
    __syncthreads();
    return s;
  };
  auto advance = [&](const Vals& s) {  // S_t = beta S_{t-1} + e kh^T (column j), zs_t = zs_{t-1} + kf
    if constexpr (DELTA)
      for (int c = 0; c < D; ++c) S[c * M::LD + j] = fmaf(sh_e[c], s.kh, s.beta * S[c * M::LD + j]);
    else
      col_axpy<D>(S, j, sh_e, s.kh);
    zs += s.kf;
  };

  for (int t = 0; t < T; ++t) {
    const long long o = base + (long long)t * D + j;
    if (t % CH == 0) save<D, false>(ck + (long long)(t / CH) * SLOT, S, nullptr, zs);
    advance(prelude(t, x.k[o], x.v[o]));
  }
  for (int c = chunks - 1; c >= 0; --c) {
    const int t0 = c * CH, t1 = min(T, t0 + CH);
    SlotRegs<D, false> regs;
    regs.fetch(ck + (long long)c * SLOT);
    __syncthreads();
    zs = regs.commit(S, nullptr);
    __syncthreads();
    for (int t = t0; t < t1; ++t) {
      const long long o = base + (long long)t * D + j;
      save<D, false>(scratch + (long long)(t - t0) * SLOT, S, nullptr, zs);
      advance(prelude(t, x.k[o], x.v[o]));
    }
    regs.fetch(scratch + (long long)(t1 - 1 - t0) * SLOT);
    for (int t = t1 - 1; t >= t0; --t) {
      const long long o = base + (long long)t * D + j;
      const float kr = x.k[o], vr = x.v[o], qr = x.q[o], dor = g.dout[o];
      __syncthreads();
      zs = regs.commit(S, nullptr);  // S_{t-1}, zs_{t-1}
      if (t > t0) regs.fetch(scratch + (long long)(t - 1 - t0) * SLOT);
      const Vals s = prelude(t, kr, vr);
      // Read: S_t qf = beta S_{t-1} qf + e (kh.qf); dqf = S_t^T g = beta S_{t-1}^T g + kh (e.g).
      const float qf = phi(qr), zst = zs + s.kf;
      sh_qf[j] = qf;
      __syncthreads();
      const float Sq = row_dot<D>(S, j, sh_qf);
      float r4[2] = {zst * qf, s.kh * qf};
      block_sums<D, 2>(r4, red);
      const float den = r4[0] < prm.eps ? prm.eps : r4[0];
      const float o_j = (s.beta * Sq + s.e * r4[1]) / den;
      const float gj = dor / den;
      sh_g[j] = gj;
      float r5[2] = {gj * o_j, s.e * gj};
      block_sums<D, 2>(r5, red);
      float dqf = s.beta * col_dot<D>(S, j, sh_g) + s.kh * r5[1];
      if (!(r4[0] < prm.eps)) {
        dqf -= r5[0] * zst;
        dzs -= r5[0] * qf;
      }
      g.dq[o] = dqf * dphi(qr);
      col_axpy<D>(dS, j, sh_g, qf);  // dS += g qf^T
      __syncthreads();
      // Write: de = dS kh (= dv), dkh = dS^T e [- S_{t-1}^T de], dbeta = <dS, S_{t-1}>.
      const float de = row_dot<D>(dS, j, sh_kh);
      float dkh = col_dot<D>(dS, j, sh_e);
      g.dv[o] = de;
      if constexpr (DELTA) {
        sh_de[j] = de;
        float rb = 0.f;
        for (int c = 0; c < D; ++c) rb = fmaf(dS[j * M::LD + c], S[j * M::LD + c], rb);
        float r6[1] = {rb};
        block_sums<D, 1>(r6, red);  // all reads of dS done before the update below
        if (gated && j == 0) g.dg[seq * T + t] = r6[0] * s.beta * (1.f - s.beta);
        dkh -= col_dot<D>(S, j, sh_de);
        for (int c = 0; c < D; ++c) dS[c * M::LD + j] = s.beta * dS[c * M::LD + j] - sh_de[c] * s.kh;
        float r9[1] = {s.kh * dkh};
        block_sums<D, 1>(r9, red);
        const float dkf = dzs + (s.nk == 0.f ? 0.f : (dkh - s.kh * r9[0]) / s.nk);
        g.dk[o] = dkf * dphi(kr);
      } else {
        g.dk[o] = (dzs + dkh) * dphi(kr);
      }
    }
  }
}

template <RecurrentKind K, int D> cudaError_t launch(const RecurrentTensors& x, const RecurrentGrads& g,
                                                    const RecurrentParams& p, float* ws, cudaStream_t s) {
  const std::size_t bytes = Smem<D>::BYTES;
  auto kernel = K == RecurrentKind::Vla ? vla_backward_kernel<D>
              : K == RecurrentKind::DeltaNet ? delta_backward_kernel<true, D> : delta_backward_kernel<false, D>;
  if (bytes > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
    if (e != cudaSuccess) return e;
  }
  kernel<<<dim3(unsigned(x.B) * unsigned(x.H)), dim3(D), bytes, s>>>(x, g, p, ws);
  return cudaGetLastError();
}

template <RecurrentKind K>
cudaError_t launch_d(const RecurrentTensors& x, const RecurrentGrads& g, const RecurrentParams& p, float* ws,
                     cudaStream_t s) {
  switch (x.d) {
    case 16: return launch<K, 16>(x, g, p, ws, s);
    case 32: return launch<K, 32>(x, g, p, ws, s);
    case 64: return launch<K, 64>(x, g, p, ws, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t recurrent_backward(RecurrentKind kind, const RecurrentTensors& x, const RecurrentGrads& g,
                               const RecurrentParams& p, float* workspace, cudaStream_t stream) {
  if (x.B < 1 || x.H < 1 || x.T < 0 || !x.q || !x.k || !x.v) return cudaErrorInvalidValue;
  if (!g.dout || !g.dq || !g.dk || !g.dv || !workspace) return cudaErrorInvalidValue;
  if (kind == RecurrentKind::Vla && (!x.u || !g.du)) return cudaErrorInvalidValue;
  if (kind == RecurrentKind::DeltaNet && x.g && !g.dg) return cudaErrorInvalidValue;
  if ((long long)x.B * x.H > 0x7fffffffLL) return cudaErrorInvalidValue;
  if (x.T == 0) return cudaSuccess;
  switch (kind) {
    case RecurrentKind::Vla: return launch_d<RecurrentKind::Vla>(x, g, p, workspace, stream);
    case RecurrentKind::Linear: return launch_d<RecurrentKind::Linear>(x, g, p, workspace, stream);
    case RecurrentKind::DeltaNet: return launch_d<RecurrentKind::DeltaNet>(x, g, p, workspace, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace vla::gpu
