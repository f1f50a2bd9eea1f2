// Fused forward kernels of VLA (Algorithm 1), linear attention (eq. 3) and DeltaNet (eq. 4); see
// gpu/recurrent_forward.hpp for the contract and docs/gpu.md for the design and its floor.
//
// Parallel structure. The recurrence is sequential in t, so one thread block owns one (b, h) sequence
// for all T steps. Thread (i, p) holds columns [p*COLS, (p+1)*COLS) of row i of S_t and of A_t in
// registers (COLS = d / P <= 32, P threads per row; Layout); it also owns element i of every
// per-token vector. d = 32 is one warp, so every barrier is a __syncwarp and every reduction a
// 5-level shuffle butterfly.
//
// Per step, the dependent chain is cut to three barriers by reading the post-update quantities
// from the pre-update state (all exact identities of Algorithm 1):
//   A_t k_hat = A_{t-1} k_hat - z (z^T k_hat) / delta_c  (+ eta k_hat on refresh steps)  (lines 12-19)
//   S_t q     = S_{t-1} q + e (alpha_hat^T q)                                             (lines 22, 26)
//   A u, A k_hat, S k_hat use the un-normalised phi(k), u_raw and are scaled once the norms arrive.
// so the four matrix-vector products of a step run together, right after the first barrier.
#include "gpu/recurrent_forward.hpp"

#include "core/phi.hpp"

namespace vla::gpu {
namespace {

template <int D> struct Layout {
  // Columns of S (and A) per thread: D / P for the fewest threads per row P (a power of two, so that a
  // row's parts are adjacent lanes a xor butterfly sums) that keep a part at most 32 columns wide and a
  // multiple of 4 (16-byte loads). d = 96: P = 4 parts of 24.
  static constexpr int parts() {
    for (int p = 1; p <= D; p *= 2)
      if (D % p == 0 && D / p <= 32 && (D / p) % 4 == 0) return p;
    return 0;
  }
  static constexpr int P = parts();
  static constexpr int COLS = P > 0 ? D / P : 4;
  static_assert(P > 0, "no thread layout for this head width");
  static constexpr int THREADS = D * P;
  static constexpr int NW = (THREADS + 31) / 32;
  static constexpr int LANES = THREADS < 32 ? THREADS : 32;
  static constexpr unsigned MASK = THREADS >= 32 ? 0xffffffffu : ((1u << THREADS) - 1u);
  // Shared vectors are padded by 4 floats after every part, so that the P parts of a row, which read
  // different 16-byte chunks at once, fall in different banks.
  __host__ __device__ static constexpr int pad(int c) { return c + int(unsigned(c) / COLS) * 4; }  // c >= 0
  static constexpr int VEC = pad(D);
};

// Block barrier: a warp barrier when the block is one warp.
template <int D> __device__ __forceinline__ void barrier() {
  if constexpr (Layout<D>::NW == 1) __syncwarp(Layout<D>::MASK);
  else __syncthreads();
}

// Sum over the P threads of one row (adjacent lanes).
template <int D, int N> __device__ __forceinline__ void part_sum(float (&x)[N]) {
#pragma unroll
  for (int off = 1; off < Layout<D>::P; off <<= 1)
#pragma unroll
    for (int n = 0; n < N; ++n) x[n] += __shfl_xor_sync(Layout<D>::MASK, x[n], off);
}

// Sum over rows (each row counted once; every thread of a row holds the same x), then a barrier
// (which also publishes the caller's shared-vector writes). Every thread ends with bitwise the
// same sums: a xor butterfly adds symmetric pairs, and the cross-warp sum has one fixed order.
template <int D, int N> __device__ __forceinline__ void row_sum_barrier(float (&x)[N], float* slot) {
  using L = Layout<D>;
#pragma unroll
  for (int off = L::P; off < L::LANES; off <<= 1)
#pragma unroll
    for (int n = 0; n < N; ++n) x[n] += __shfl_xor_sync(L::MASK, x[n], off);
  if constexpr (L::NW > 1) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0)
#pragma unroll
      for (int n = 0; n < N; ++n) slot[warp * N + n] = x[n];
  }
  barrier<D>();
  if constexpr (L::NW > 1) {
#pragma unroll
    for (int n = 0; n < N; ++n) {
      float s = 0.f;
#pragma unroll
      for (int w = 0; w < L::NW; ++w) s += slot[w * N + n];
      x[n] = s;
    }
  }
}

// y += M[0..COLS) . vec[c0 .. c0+COLS), 16-byte shared loads (broadcast across the rows).
template <int D> __device__ __forceinline__ float row_dot(const float (&M)[Layout<D>::COLS], const float* vec) {
  float acc = 0.f;
#pragma unroll
  for (int j = 0; j < Layout<D>::COLS; j += 4) {
    const float4 x = *reinterpret_cast<const float4*>(vec + j);
    acc = fmaf(M[j], x.x, acc);
    acc = fmaf(M[j + 1], x.y, acc);
    acc = fmaf(M[j + 2], x.z, acc);
    acc = fmaf(M[j + 3], x.w, acc);
  }
  return acc;
}

template <RecurrentKind K, int D, bool STATS, bool CKPT>
__global__ void __launch_bounds__(Layout<D>::THREADS)
    recurrent_forward_kernel(const RecurrentTensors x, const RecurrentParams prm) {
  using L = Layout<D>;
  constexpr int C = L::COLS, P = L::P, NW = L::NW, VEC = L::VEC;
  constexpr bool kVla = K == RecurrentKind::Vla, kDelta = K == RecurrentKind::DeltaNet;
  const int i = threadIdx.x / P;  // row of S and A, element of every per-token vector
  const int p = threadIdx.x % P;  // which COLS-wide part of the row
  const int c0 = L::pad(p * C);   // start of this part in a padded shared vector
  const bool writer = p == 0;     // one thread per row publishes vector element i
  const int T = x.T;
  const long long seq = blockIdx.x;  // b * H + h
  const long long base = seq * T * D;

  // Double-buffered by step parity: a fast thread may write step t+1's vectors while a slow one
  // still reads step t's (the barriers of step t+1 then order the next reuse).
  __shared__ __align__(16) float sh_k[2][VEC];  // phi(k_t)
  __shared__ __align__(16) float sh_q[2][VEC];  // phi(q_t)
  __shared__ __align__(16) float sh_u[2][VEC];  // u_raw (VLA)
  __shared__ __align__(16) float sh_z[2][VEC];  // z = A_{t-1} u (VLA)
  __shared__ __align__(16) float sh_a[2][VEC];  // alpha = A_t k_hat (VLA)
  __shared__ float slot[2][4][NW * 3];          // cross-warp partial sums of the four reductions

  const float eps = prm.eps;
  const float scale = rsqrtf(float(D));  // u = unit(u_raw) / sqrt(d_h), Alg. 1 line 10
  float S[C], A[C];
#pragma unroll
  for (int j = 0; j < C; ++j) {
    S[j] = 0.f;                                                   // S_0 = 0 (line 4)
    A[j] = (kVla && p * C + j == i) ? 1.f / prm.lambda0 : 0.f;    // A_0 = I / lambda0 (line 4)
  }
  float zsum = 0.f;  // z_i of eq. (11): sum of phi(k_s), s <= t
  // zsum is set to NaN from the step where a squared norm of unit() (||phi(k)||^2, ||u_raw||^2,
  // ||alpha||^2; Alg. 1 lines 9, 10, 20) overflows fp32: unit(x) would take 1 / inf = 0 there and the
  // recurrence would go on with finite wrong values. The CPU rules rescale before squaring
  // (core/feature_map.hpp, unit()) and stay exact; this kernel does not pay for a rescale on every step
  // and prints NaN from that step on instead (a NaN z makes every later normaliser NaN). Tested off the
  // step's dependent chain: selects on 1 / ||x|| there cost 7% at d = 32, a flag register spills at d = 128.
  const float kNaN = __int_as_float(0x7fffffff);

  // Inputs of step t in registers; step t+1's are loaded at the top of step t (they do not depend
  // on the state), so the global-load latency overlaps the step.
  auto load = [&](int t, float& kr, float& qr, float& vr, float& ur, float& gr) {
    const long long o = base + (long long)t * D + i;
    kr = x.k[o];
    qr = x.q[o];
    vr = x.v[o];
    ur = kVla ? x.u[o] : 0.f;
    gr = (kDelta && x.g) ? x.g[seq * T + t] : 0.f;
  };
  float kr, qr, vr, ur, gr;
  if (T > 0) load(0, kr, qr, vr, ur, gr);

  for (int t = 0; t < T; ++t) {
    const int b = t & 1;
    float kn = 0.f, qn = 0.f, vn = 0.f, un = 0.f, gn = 0.f;
    if (t + 1 < T) load(t + 1, kn, qn, vn, un, gn);

    // The backward's checkpoint (gpu/recurrent_forward.hpp): the state before step t, every
    // kBackwardChunk-th step. Thread (i, p) stores its part of row i of S and A; A is stored as this
    // kernel has it, symmetric only up to rounding (the update below forms (z_i / dc) z_j, not
    // (z_i z_j) / dc): the backward symmetrises it when it loads a checkpoint.
    // CKPT is a template flag, not a runtime test, so that the forward without checkpoints keeps its
    // register budget (a runtime test takes the VLA kernel at d = 64 from 128 to 155 registers).
    if (CKPT && t % kBackwardChunk == 0) {
      float* ck = x.checkpoints + backward_checkpoint_offset(seq, T, D, t / kBackwardChunk);
      float* row = ck + i * D + p * C;
#pragma unroll
      for (int j = 0; j < C; j += 4) {
        *reinterpret_cast<float4*>(row + j) = make_float4(S[j], S[j + 1], S[j + 2], S[j + 3]);
        if constexpr (kVla) *reinterpret_cast<float4*>(row + D * D + j) = make_float4(A[j], A[j + 1], A[j + 2], A[j + 3]);
      }
      if (writer) ck[2 * D * D + i] = zsum;
    }
    const float kf = elu_plus_one(kr), qf = elu_plus_one(qr);  // phi, lines 8, 24
    zsum += kf;                              // line 25
    if (writer) {
      sh_k[b][L::pad(i)] = kf;
      sh_q[b][L::pad(i)] = qf;
      if constexpr (kVla) sh_u[b][L::pad(i)] = ur;
    }
    // Reduction 1: ||phi(k)||^2, (VLA: ||u_raw||^2 | others: phi(k).phi(q)), phi(q).z_t
    float r1[3] = {kf * kf, kVla ? ur * ur : kf * qf, qf * zsum};
    row_sum_barrier<D, 3>(r1, slot[b][0]);
    // max(phi(q)^T z, eps), NaN stays NaN (eq. 11); an infinite one is turned into a NaN row at the
    // store below (not the 0 that S q / inf gives), as the CPU read does (normalised_read).
    const float den = r1[2] < eps ? eps : r1[2];
    const float nk = sqrtf(r1[0]);
    // k_hat = phi(k) inv_nk (line 9; unit(): a zero vector stays zero); VLA without key normalisation:
    // k_hat = phi(k).
    const float inv_nk = nk == 0.f || (kVla && !prm.normalise_key) ? 1.f : 1.f / nk;
    if constexpr (K != RecurrentKind::Linear) zsum = isinf(nk) ? kNaN : zsum;

    float o_i, delta = 0.f;
    float mv[4] = {0.f, 0.f, 0.f, 0.f};  // S q, S phi(k), A u_raw, A phi(k) over this part's columns
    mv[0] = row_dot<D>(S, &sh_q[b][c0]);
    if constexpr (K != RecurrentKind::Linear) mv[1] = row_dot<D>(S, &sh_k[b][c0]);
    if constexpr (kVla) {
      mv[2] = row_dot<D>(A, &sh_u[b][c0]);
      mv[3] = row_dot<D>(A, &sh_k[b][c0]);
    }
    part_sum<D, 4>(mv);

    if constexpr (kVla) {
      const float nu = sqrtf(r1[1]);
      const float su = nu == 0.f ? 0.f : scale / nu;  // u = u_raw * su (line 10)
      const float k_hat = kf * inv_nk;                 // line 9
      const float u_i = ur * su;
      const float z_i = mv[2] * su;                    // z = A_{t-1} u (line 12)
      const float e_i = vr - mv[1] * inv_nk;           // e = v - S_{t-1} k_hat (line 21)
      if (writer) sh_z[b][L::pad(i)] = z_i;
      float r2[2] = {u_i * z_i, z_i * k_hat};          // u^T z, z^T k_hat
      row_sum_barrier<D, 2>(r2, slot[b][1]);
      delta = 1.f + r2[0];                             // line 12
      const float dc = delta >= eps ? delta : eps;     // line 13: clamp (NaN -> eps, as the CPU rule)
      const bool refresh = prm.refresh_period > 0 && (t + 1) % prm.refresh_period == 0;  // line 16
      const float eta = refresh ? prm.refresh_eta : 0.f;
      // alpha = A_t k_hat with A_t = A_{t-1} - z z^T / dc + eta I (lines 14, 16, 19)
      const float alpha_i = mv[3] * inv_nk - z_i * (r2[1] / dc) + eta * k_hat;
      if (writer) sh_a[b][L::pad(i)] = alpha_i;
      float r3[2] = {alpha_i * alpha_i, alpha_i * qf};
      row_sum_barrier<D, 2>(r3, slot[b][2]);
      const float na = sqrtf(r3[0]);
      const float inv_na = na == 0.f ? 0.f : 1.f / na;  // alpha_hat = unit(alpha) (line 20)
      zsum = isinf(nu) || isinf(na) ? kNaN : zsum;
      o_i = (mv[0] + e_i * (r3[1] * inv_na)) / den;    // o = S_t phi(q) / den (line 26)
      const float zi_dc = z_i / dc;
#pragma unroll
      for (int j = 0; j < C; j += 4) {
        const float4 zj = *reinterpret_cast<const float4*>(&sh_z[b][c0 + j]);
        const float4 aj = *reinterpret_cast<const float4*>(&sh_a[b][c0 + j]);
        A[j] -= zi_dc * zj.x;  A[j + 1] -= zi_dc * zj.y;  A[j + 2] -= zi_dc * zj.z;  A[j + 3] -= zi_dc * zj.w;  // line 14
        S[j] += e_i * (aj.x * inv_na);  S[j + 1] += e_i * (aj.y * inv_na);                                   // line 22
        S[j + 2] += e_i * (aj.z * inv_na);  S[j + 3] += e_i * (aj.w * inv_na);
      }
      if (refresh)
#pragma unroll
        for (int j = 0; j < C; ++j)
          if (p * C + j == i) A[j] += eta;
    } else if constexpr (kDelta) {
      const float beta = x.g ? sigmoid(gr) : 1.f;  // beta_t = sigmoid(g_t) (eq. 4)
      const float e_i = vr - mv[1] * inv_nk;                    // e = v - S_{t-1} k_hat
      // S_t = beta S_{t-1} + e k_hat^T, so S_t q = beta S_{t-1} q + e (k_hat . q)
      o_i = (beta * mv[0] + e_i * (r1[1] * inv_nk)) / den;
#pragma unroll
      for (int j = 0; j < C; j += 4) {
        const float4 kj = *reinterpret_cast<const float4*>(&sh_k[b][c0 + j]);
        S[j] = beta * S[j] + e_i * (kj.x * inv_nk);
        S[j + 1] = beta * S[j + 1] + e_i * (kj.y * inv_nk);
        S[j + 2] = beta * S[j + 2] + e_i * (kj.z * inv_nk);
        S[j + 3] = beta * S[j + 3] + e_i * (kj.w * inv_nk);
      }
    } else {
      // Linear attention: S_t = S_{t-1} + v phi(k)^T, so S_t q = S_{t-1} q + v (phi(k) . q) (eq. 3)
      o_i = (mv[0] + vr * r1[1]) / den;
#pragma unroll
      for (int j = 0; j < C; j += 4) {
        const float4 kj = *reinterpret_cast<const float4*>(&sh_k[b][c0 + j]);
        S[j] += vr * kj.x;  S[j + 1] += vr * kj.y;  S[j + 2] += vr * kj.z;  S[j + 3] += vr * kj.w;
      }
    }
    if (writer) x.o[base + (long long)t * D + i] = isinf(den) || isnan(zsum) ? kNaN : o_i;

    if constexpr (STATS) {
      float r4[2] = {0.f, 0.f};  // ||S_t||_F^2, ||A_t||_F^2 over this thread's entries
#pragma unroll
      for (int j = 0; j < C; ++j) {
        r4[0] = fmaf(S[j], S[j], r4[0]);
        r4[1] = fmaf(A[j], A[j], r4[1]);
      }
      part_sum<D, 2>(r4);
      row_sum_barrier<D, 2>(r4, slot[b][3]);
      if (threadIdx.x == 0) {
        float* st = x.stats + (seq * T + t) * 3;
        st[0] = sqrtf(r4[0]);
        st[1] = kVla ? sqrtf(r4[1]) : __int_as_float(0x7fc00000);  // NaN: the rule has no A
        st[2] = kVla ? delta : __int_as_float(0x7fc00000);         // delta before the clamp
      }
    }
    kr = kn; qr = qn; vr = vn; ur = un; gr = gn;
  }
}

template <RecurrentKind K, int D>
cudaError_t launch(const RecurrentTensors& x, const RecurrentParams& p, cudaStream_t s) {
  const dim3 grid(unsigned(x.B) * unsigned(x.H)), block(Layout<D>::THREADS);
  if (x.stats && x.checkpoints) recurrent_forward_kernel<K, D, true, true><<<grid, block, 0, s>>>(x, p);
  else if (x.stats) recurrent_forward_kernel<K, D, true, false><<<grid, block, 0, s>>>(x, p);
  else if (x.checkpoints) recurrent_forward_kernel<K, D, false, true><<<grid, block, 0, s>>>(x, p);
  else recurrent_forward_kernel<K, D, false, false><<<grid, block, 0, s>>>(x, p);
  return cudaGetLastError();
}

template <RecurrentKind K>
cudaError_t launch_d(const RecurrentTensors& x, const RecurrentParams& p, cudaStream_t s) {
  switch (x.d) {
    case 16: return launch<K, 16>(x, p, s);
    case 32: return launch<K, 32>(x, p, s);
    case 64: return launch<K, 64>(x, p, s);
    case 96: return launch<K, 96>(x, p, s);
    case 128: return launch<K, 128>(x, p, s);
    default: return cudaErrorInvalidValue;
  }
}

__global__ void fill_random_kernel(float* x, long long n, unsigned long long seed) {
  for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < n; idx += (long long)gridDim.x * blockDim.x) {
    // splitmix64 of (seed, idx): independent streams per element, reproducible for a seed.
    unsigned long long z = seed + 0x9e3779b97f4a7c15ull * (unsigned long long)(idx + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const float u01 = float(z >> 40) * (1.0f / 16777216.0f);  // 24 random bits in [0, 1)
    x[idx] = (2.f * u01 - 1.f) * 1.7320508f;                   // uniform on [-sqrt 3, sqrt 3]
  }
}

}  // namespace

cudaError_t recurrent_forward(RecurrentKind kind, const RecurrentTensors& x, const RecurrentParams& p,
                              cudaStream_t stream) {
  if (x.B < 1 || x.H < 1 || x.T < 0 || !x.q || !x.k || !x.v || !x.o) return cudaErrorInvalidValue;
  if (kind == RecurrentKind::Vla && !x.u) return cudaErrorInvalidValue;
  if ((long long)x.B * x.H > 0x7fffffffLL) return cudaErrorInvalidValue;
  if (x.T == 0) return cudaSuccess;
  switch (kind) {
    case RecurrentKind::Vla: return launch_d<RecurrentKind::Vla>(x, p, stream);
    case RecurrentKind::Linear: return launch_d<RecurrentKind::Linear>(x, p, stream);
    case RecurrentKind::DeltaNet: return launch_d<RecurrentKind::DeltaNet>(x, p, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t fill_random(float* x, long long n, unsigned long long seed, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const long long blocks = (n + 255) / 256;
  fill_random_kernel<<<unsigned(blocks < 4096 ? blocks : 4096), 256, 0, stream>>>(x, n, seed);
  return cudaGetLastError();
}

}  // namespace vla::gpu
