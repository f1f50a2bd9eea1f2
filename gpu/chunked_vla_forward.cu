// The chunkwise-parallel forward of Algorithm 1 on the GPU. The equations (V1)-(V5) are derived in
// docs/chunkwise-vla.md; core/rules/vla/chunked.hpp is the same algorithm on the CPU over any scalar, and
// the GPU tests hold this kernel to the CPU double path (tests/gpu/test_chunked_vla_forward.cpp).
//
// Parallel structure. One thread block owns one (b, h) sequence and walks its chunks in order: the chunk
// boundary state (A_c, S_c, z_c) is the only thing carried, in shared memory. Within a chunk of n <= CM
// tokens (rows of every chunk matrix are tokens; rows n.. are zero, so every product runs over whole
// tiles), eight phases separated by block barriers ("tc": on the tensor cores, see below):
//   P1  W = U A_c and K A_c                                            (V1, V3)  tc
//   P2  G = I + U W^T                                                  (V1)      tc
//   P3  warp 0:  G = L D L^T (the pivots D_t are Alg. 1's delta_t, clamped as produced, line 13),
//                then Y = L^-1 W by a column sweep                     (V2)
//       warp 1:  the running key sums z_c + sum_{j<=t} phi(k_j), and z for the next chunk   (D3, line 24)
//       others:  QS = Q S_c^T and E = V - K S_c^T                      (V5)      tc
//   P4  M = tril(K Y^T) D^-1, then alpha_t = (K A_c)_t - (M Y)_t, + eta k_hat_t when the refresh falls on
//       the chunk's last token                                         (V3)      tc
//   P5  one warp per token: alpha_hat_t = unit(alpha_t) (line 20), den_t = max(phi(q_t) . z_t, eps) (D3)
//   P6  L_S = strictly lower K Alpha^T, QA = lower Q Alpha^T           (V5)      tc
//   P7  warp 0:  E = (I + L_S)^-1 E by a column sweep                  (V5)
//       others:  Y^T D^-1 Y (V4, tc); the next chunk's features from the inputs prefetched in P1
//   P8  O = (QS + QA E) / den (stored), S' = S_c + E^T Alpha (V5, tc), A' = A_c - sym(Y^T D^-1 Y)
//       (+ eta I on a refresh, V4)
// The factorisation and the two triangular sweeps are the sequential parts: each is CM steps of one warp
// in registers and shuffles, no block barrier inside. The products run on the tensor cores (m16n8k8 TF32
// MMAs with fp32 accumulation) at fp32 accuracy by default (3xTF32) or with TF32 operands (ChunkedVlaOperands).
#include "gpu/chunked_vla_forward.hpp"

#include "core/phi.hpp"

#include <cmath>

namespace vla::gpu {
namespace {

// VLA_PHASE(i) ends phase i with a block barrier. For the development driver
// (gpu/dev/chunked_vla_forward_check.cu defines VLA_CHUNKED_VLA_PHASES and includes this file) it also
// counts, per warp and phase, the cycles from the barrier that opens the phase to the end of the warp's
// own work in it (the slowest warp of a phase is its critical path), summed over block 0's chunks.
#ifdef VLA_CHUNKED_VLA_PHASES
__device__ unsigned long long chunked_vla_phase_cycles[8][8];
#define VLA_PHASE(i)                                                                         \
  do {                                                                                       \
    phase_cycles[i] += static_cast<unsigned long long>(clock64() - phase_clock);            \
    __syncthreads();                                                                         \
    phase_clock = clock64();                                                                 \
  } while (0)
#else
#define VLA_PHASE(i) __syncthreads()
#endif

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr unsigned kFull = 0xffffffffu;

// A chunk's start c0 -> its length: C tokens, fewer at the end of the sequence, and ending on the next
// refresh step (line 16 after the steps with (t + 1) mod period == 0), as core/rules/vla/chunked.hpp.
__host__ __device__ inline int chunk_length(int c0, int T, int C, int period) {
  int n = C < T - c0 ? C : T - c0;
  if (period > 0 && period - c0 % period < n) n = period - c0 % period;
  return n;
}

// Shared memory of one block: row-major matrices with row stride LD = D + 4 floats (rows 16-byte aligned
// for float4 loads; the tensor-core fragments, which read 8 rows x 4 columns, then hit 32 banks). Token
// matrices have NP = CM rounded up to 16 rows (the MMA tile's m16); rows n..NP-1 stay zero.
template <int D, int CM> struct ChunkSmem {
  static constexpr int LD = D + 4;
  static constexpr int NP = (CM + 15) / 16 * 16;
  float A[D * LD];   // A_c (d, d), symmetric
  float dA[D * LD];  // Y^T D^-1 Y      (V4)
  float S[D * LD];   // S_c (d_v, d); row i is value coordinate i
  float z[D];        // z_c, the sum of phi(k) so far
  // The chunk's per-token maps (Alg. 1 lines 8-10), double-buffered: the next chunk's are made during this one.
  float Qf[2][NP * LD];  // phi(q_t)
  float Kf[2][NP * LD];  // phi(k_t)
  float Kh[2][NP * LD];  // k_hat_t
  float U[2][NP * LD];   // u_t = unit(u_raw) / sqrt(d)
  float V[2][NP * LD];   // v_t
  float W[NP * LD];   // U A_c                 (V1)
  float KA[NP * LD];  // K A_c                 (V3)
  float Y[NP * LD];   // L^-1 W, rows A_{t-1} u_t   (V2)
  float Ah[NP * LD];  // alpha_t, then alpha_hat_t   (V3, line 20)
  float QS[NP * LD];  // Q S_c^T               (V5)
  float E[NP * LD];   // V - K S_c^T, then the residuals E   (V5)
  float G[NP * LD];   // I + U W^T, then L (strictly lower) (V1); then tril(K Y^T) D^-1 (V3)
  float LS[NP * LD];  // K Alpha^T, strictly lower   (V5)
  float QA[NP * LD];  // Q Alpha^T, lower            (V5)
  float Zc[NP * LD];  // z_c + sum_{j<=t} phi(k_j), the read's running key sums   (D3)
  float Dinv[NP];     // 1 / D_t
  float den[NP];      // the read's denominators
};

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) x += __shfl_xor_sync(kFull, x, off);
  return x;  // every lane holds bitwise the same sum (a xor butterfly adds symmetric pairs)
}

// 1 / ||x|| from ||x||^2; NaN where unit() has no finite answer (an overflowed or zero square), so that
// the error shows in the output instead of a plausible 0 (docs/recurrences.md, "Scale").
__device__ __forceinline__ float inv_norm(float sq) {
  return sq > 0.f && sq <= 3.402823466e38f ? 1.f / sqrtf(sq) : __int_as_float(0x7fc00000);
}

// a . b over K floats, both 16-byte aligned (float4 loads: a quarter warp reading 8 rows of stride LD
// then covers 32 banks).
template <int K> __device__ __forceinline__ float dot(const float* __restrict__ a, const float* __restrict__ b) {
  float acc = 0.f;
#pragma unroll
  for (int k = 0; k < K; k += 4) {
    const float4 x = *reinterpret_cast<const float4*>(a + k), y = *reinterpret_cast<const float4*>(b + k);
    acc = fmaf(x.x, y.x, acc);
    acc = fmaf(x.y, y.y, acc);
    acc = fmaf(x.z, y.z, acc);
    acc = fmaf(x.w, y.w, acc);
  }
  return acc;
}

// The tensor cores in fp32 accuracy: x = big + small with both parts TF32 (10-bit mantissa), and
// a b ~ a_big b_big + a_big b_small + a_small b_big (the dropped a_small b_small is ~2^-22 relative): three
// m16n8k8 TF32 MMAs with fp32 accumulation per fp32 product ("3xTF32").
__device__ __forceinline__ unsigned tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

__device__ __forceinline__ void split_tf32(float x, unsigned& big, unsigned& small) {
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(big) : "f"(x));
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(small) : "f"(x - __uint_as_float(big)));
}

__device__ __forceinline__ void mma_tf32(float (&c)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// One warp: the 16 x 8 tile at (m0, n0) of C += sum_{k < K} a(m, k) b(k, n), K a multiple of 8. Lane
// (g, t) = (lane / 4, lane % 4) holds C at (m0 + g, n0 + 2t), (m0 + g, n0 + 2t + 1), (m0 + g + 8, n0 + 2t),
// (m0 + g + 8, n0 + 2t + 1) in c[0..3] (PTX ISA, mma.m16n8k8 fragment layouts).
// kOps: Fp32 (3xTF32, fp32 accuracy) or Tf32 (one MMA of the TF32-rounded operands).
template <int K, ChunkedVlaOperands kOps, class FA, class FB>
__device__ __forceinline__ void mma_tile(float (&c)[4], FA a, FB b, int m0, int n0, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int k0 = 0; k0 < K; k0 += 8) {
    unsigned ab[4], as[4], bb[2], bs[2];
    if constexpr (kOps == ChunkedVlaOperands::Tf32) {
      ab[0] = tf32(a(m0 + g, k0 + t));
      ab[1] = tf32(a(m0 + g + 8, k0 + t));
      ab[2] = tf32(a(m0 + g, k0 + t + 4));
      ab[3] = tf32(a(m0 + g + 8, k0 + t + 4));
      bb[0] = tf32(b(k0 + t, n0 + g));
      bb[1] = tf32(b(k0 + t + 4, n0 + g));
      mma_tf32(c, ab, bb);
      continue;
    }
    split_tf32(a(m0 + g, k0 + t), ab[0], as[0]);
    split_tf32(a(m0 + g + 8, k0 + t), ab[1], as[1]);
    split_tf32(a(m0 + g, k0 + t + 4), ab[2], as[2]);
    split_tf32(a(m0 + g + 8, k0 + t + 4), ab[3], as[3]);
    split_tf32(b(k0 + t, n0 + g), bb[0], bs[0]);
    split_tf32(b(k0 + t + 4, n0 + g), bb[1], bs[1]);
    mma_tf32(c, as, bb);  // the small terms first, the large last
    mma_tf32(c, ab, bs);
    mma_tf32(c, ab, bb);
  }
}

// Calls f(m, n, value) for the four entries of a tile that lane holds.
template <class F> __device__ __forceinline__ void tile_store(const float (&c)[4], int m0, int n0, int lane, F f) {
  const int g = lane >> 2, t = lane & 3;
  f(m0 + g, n0 + 2 * t, c[0]);
  f(m0 + g, n0 + 2 * t + 1, c[1]);
  f(m0 + g + 8, n0 + 2 * t, c[2]);
  f(m0 + g + 8, n0 + 2 * t + 1, c[3]);
}

// c[0..3] = f(m, n) at the entries of the tile that lane holds.
template <class F> __device__ __forceinline__ void tile_load(float (&c)[4], int m0, int n0, int lane, F f) {
  const int g = lane >> 2, t = lane & 3;
  c[0] = f(m0 + g, n0 + 2 * t);
  c[1] = f(m0 + g, n0 + 2 * t + 1);
  c[2] = f(m0 + g + 8, n0 + 2 * t);
  c[3] = f(m0 + g + 8, n0 + 2 * t + 1);
}

// out(m, n) = sum_{k < K} a(m, k) b(k, n) for m < M, n < N on the tensor cores, handed to epi(m, n, value).
// The M/16 x N/8 tiles are dealt round-robin to `slots` warps; the calling warp is `slot` of them.
template <int M, int N, int K, ChunkedVlaOperands kOps, class FA, class FB, class FE>
__device__ __forceinline__ void product(FA a, FB b, FE epi, int slot, int slots, int lane) {
  for (int tile = slot; tile < (M / 16) * (N / 8); tile += slots) {
    const int m0 = tile / (N / 8) * 16, n0 = tile % (N / 8) * 8;
    float c[4] = {0.f, 0.f, 0.f, 0.f};
    mma_tile<K, kOps>(c, a, b, m0, n0, lane);
    tile_store(c, m0, n0, lane, epi);
  }
}

template <int D, int CM, ChunkedVlaOperands kOps> struct ChunkedVla {
  using Sm = ChunkSmem<D, CM>;
  static constexpr int LD = Sm::LD, NP = Sm::NP;
  static_assert(D == 32, "lane = coordinate: one warp per token row");
  // Raw inputs of the next chunk, prefetched into registers by warps 1.. (row r of the chunk is held by
  // warp 1 + r % (kWarps - 1), lane = coordinate), so that their loads overlap this chunk's work.
  static constexpr int kRows = (CM + kWarps - 2) / (kWarps - 1);

  struct Raw {
    float q[kRows], k[kRows], v[kRows], u[kRows];
  };

  __device__ static void prefetch(Raw& raw, const RecurrentTensors& x, long long base, int c0, int n, int warp, int lane) {
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int r = warp - 1 + i * (kWarps - 1);
      const bool in = r < n;
      const long long off = base + static_cast<long long>(c0 + (in ? r : 0)) * D + lane;
      raw.q[i] = in ? x.q[off] : 0.f;
      raw.k[i] = in ? x.k[off] : 0.f;
      raw.v[i] = in ? x.v[off] : 0.f;
      raw.u[i] = in ? x.u[off] : 0.f;
    }
  }

  // Alg. 1 lines 8-10 for the prefetched rows into feature buffer b; rows n..CM-1 become zero.
  __device__ static void features(Sm& s, int b, const Raw& raw, int n, int warp, int lane) {
    const float u_scale = 1.f / sqrtf(static_cast<float>(D));
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int r = warp - 1 + i * (kWarps - 1);
      if (r >= CM) continue;  // warp-uniform
      const float qf = elu_plus_one(raw.q[i]), kf = elu_plus_one(raw.k[i]);
      const float k_inv = inv_norm(warp_sum(kf * kf)), u_inv = inv_norm(warp_sum(raw.u[i] * raw.u[i])) * u_scale;
      const bool in = r < n;
      const int at = r * LD + lane;
      s.Qf[b][at] = in ? qf : 0.f;
      s.Kf[b][at] = in ? kf : 0.f;
      s.Kh[b][at] = in ? kf * k_inv : 0.f;
      s.U[b][at] = in ? raw.u[i] * u_inv : 0.f;
      s.V[b][at] = in ? raw.v[i] : 0.f;
    }
  }

  // (V1), (V3): W = U A_c and K A_c (A_c symmetric: b(k, n) = A[n][k], the conflict-free read).
  __device__ static void penalty_products(Sm& s, int b, int warp, int lane) {
    const float *U = s.U[b], *Kh = s.Kh[b];
    const auto A = [&](int k, int n) { return s.A[n * LD + k]; };
    constexpr int kTiles = NP / 16 * (D / 8);  // per product; the second starts where the first ends
    product<NP, D, D, kOps>([&](int m, int k) { return U[m * LD + k]; }, A, [&](int m, int n, float v) { s.W[m * LD + n] = v; }, warp,
                      kWarps, lane);
    product<NP, D, D, kOps>([&](int m, int k) { return Kh[m * LD + k]; }, A, [&](int m, int n, float v) { s.KA[m * LD + n] = v; },
                      (warp + kTiles) % kWarps, kWarps, lane);
  }

  // Warp 0 of P3: the unpivoted L D L^T of G, lane i holding row i in registers (right-looking: after
  // pivot j, every row i > j subtracts L_ij L_kj D_j from its entries k in (j, i]), then Y = L^-1 W.
  __device__ static void factor_and_solve(Sm& s, float eps, int lane) {
    float g[CM];
#pragma unroll
    for (int j = 0; j < CM; ++j) g[j] = lane < CM && j <= lane ? s.G[lane * LD + j] : 0.f;
    float inv_own = 0.f;
#pragma unroll
    for (int j = 0; j < CM; ++j) {
      float djj = __shfl_sync(kFull, g[j], j);  // G'_jj, from lane j
      djj = djj >= eps ? djj : eps;              // line 13's clamp, applied as the pivot is produced (NaN -> eps)
      const float inv = __frcp_rn(djj);
      const float gij = g[j];                    // G'_ij = L_ij D_j on lanes i > j
      const float lij = lane > j ? gij * inv : 0.f;
#pragma unroll
      for (int k = j + 1; k < CM; ++k) {
        const float gkj = __shfl_sync(kFull, gij, k);
        if (k <= lane) g[k] = fmaf(-lij, gkj, g[k]);
      }
      g[j] = lij;  // row lane of L (strictly lower: zero on and above the diagonal)
      if (lane == j) inv_own = inv;
    }
#pragma unroll
    for (int j = 0; j < CM; ++j)
      if (j < lane && lane < CM) s.G[lane * LD + j] = g[j];
    if (lane < CM) s.Dinv[lane] = inv_own;
    __syncwarp();
    lower_sweep(s.W, s.G, s.Y, lane);  // (V2)
  }

  // out = (I + L)^-1 in for a strictly lower L (CM x CM): lane = column, rows swept in order, each
  // finished row subtracted from the rows below it; stores after the sweep, so the loads of L can run ahead.
  __device__ static void lower_sweep(const float* in, const float* __restrict__ L, float* out, int lane) {
    float acc[CM];
#pragma unroll
    for (int i = 0; i < CM; ++i) acc[i] = in[i * LD + lane];
#pragma unroll
    for (int j = 0; j < CM; ++j)
#pragma unroll
      for (int i = j + 1; i < CM; ++i) acc[i] = fmaf(-L[i * LD + j], acc[j], acc[i]);
    __syncwarp();
#pragma unroll
    for (int i = 0; i < CM; ++i) out[i * LD + lane] = acc[i];
  }

  // Warp 1 of P3: the running key sums z_c + sum_{j<=t} phi(k_j) as rows of Zc, lane = key coordinate, and z
  // for the next chunk (D3, line 24). The read's denominators are their dot products with phi(q_t) (P5).
  __device__ static void key_sums(Sm& s, int b, int lane) {
    const float* __restrict__ Kf = s.Kf[b];
    float zc = s.z[lane];
#pragma unroll 4
    for (int r = 0; r < CM; ++r) {
      zc += Kf[r * LD + lane];  // rows past the chunk are zero
      s.Zc[r * LD + lane] = zc;
    }
    s.z[lane] = zc;
  }

  __device__ static void run(const RecurrentTensors& x, const RecurrentParams& p, int C, Sm& s) {
    const int T = x.T, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const long long base = static_cast<long long>(blockIdx.x) * T * D;
    const float eps = p.eps;
    const int period = p.refresh_period;

    float* all = reinterpret_cast<float*>(&s);
    for (int i = tid; i < static_cast<int>(sizeof(Sm) / sizeof(float)); i += kThreads) all[i] = 0.f;  // padding rows stay 0
    __syncthreads();
    if (tid < D) s.A[tid * LD + tid] = 1.f / p.lambda0;  // line 4
#ifdef VLA_CHUNKED_VLA_PHASES
    long long phase_clock = clock64();
    unsigned long long phase_cycles[8] = {};
#endif
    Raw raw;
    int c0 = 0, n = chunk_length(0, T, C, period), b = 0;
    if (warp > 0) {
      prefetch(raw, x, base, 0, n, warp, lane);
      features(s, 0, raw, n, warp, lane);
    }
    __syncthreads();

    while (c0 < T) {
      const int next = c0 + n;
      const int nn = next < T ? chunk_length(next, T, C, period) : 0;
      const float shift = period > 0 && next % period == 0 ? p.refresh_eta : 0.f;
      const float *Qf = s.Qf[b], *Kh = s.Kh[b], *U = s.U[b], *V = s.V[b];
      const auto row = [](const float* X) { return [X](int m, int k) { return X[m * LD + k]; }; };    // X as the left factor
      const auto rowT = [](const float* X) { return [X](int k, int n) { return X[n * LD + k]; }; };   // X^T as the right factor
      const auto col = [](const float* X) { return [X](int k, int n) { return X[k * LD + n]; }; };    // X as the right factor

      // P1 (V1, V3): W = U A_c, K A_c.
      penalty_products(s, b, warp, lane);
      if (warp > 0 && nn > 0) prefetch(raw, x, base, next, nn, warp, lane);
      VLA_PHASE(0);

      // P2 (V1): G = I + U W^T.
      product<NP, NP, D, kOps>(row(U), rowT(s.W), [&](int m, int j, float v) { s.G[m * LD + j] = v + (m == j ? 1.f : 0.f); }, warp, kWarps,
                         lane);
      VLA_PHASE(1);

      // P3: the factorisation and Y (warp 0), the denominators (warp 1), Q S_c^T and V - K S_c^T (the rest).
      if (warp == 0) {
        factor_and_solve(s, eps, lane);
      } else if (warp == 1) {
        key_sums(s, b, lane);
      } else {
        constexpr int kTiles = NP / 16 * (D / 8);
        product<NP, D, D, kOps>(row(Qf), rowT(s.S), [&](int m, int c, float v) { s.QS[m * LD + c] = v; }, warp - 2, kWarps - 2, lane);
        product<NP, D, D, kOps>(row(Kh), rowT(s.S), [&](int m, int c, float v) { s.E[m * LD + c] = V[m * LD + c] - v; },
                          (warp - 2 + kTiles) % (kWarps - 2), kWarps - 2, lane);
      }
      VLA_PHASE(2);

      // P4 (V3): tril(K Y^T) D^-1 (over G, whose L the sweep has used), then Alpha = K A_c - that Y.
      product<NP, NP, D, kOps>(row(Kh), rowT(s.Y), [&](int m, int j, float v) { s.G[m * LD + j] = j <= m ? v * s.Dinv[j] : 0.f; }, warp, kWarps,
                         lane);
      __syncthreads();
      product<NP, D, NP, kOps>(row(s.G), col(s.Y), [&](int m, int c, float v) {
        // the chunk's last token reads A after the refresh that follows it: + eta k_hat
        s.Ah[m * LD + c] = s.KA[m * LD + c] - v + (m == n - 1 ? shift * Kh[m * LD + c] : 0.f);
      }, warp, kWarps, lane);
      VLA_PHASE(3);

      // P5 (line 20, D3): alpha_hat_t = unit(alpha_t) and den_t = max(phi(q_t) . z_t, eps), one warp per token.
      for (int r = warp; r < CM; r += kWarps) {
        const float a = s.Ah[r * LD + lane];
        const float a2 = warp_sum(a * a), qz = warp_sum(Qf[r * LD + lane] * s.Zc[r * LD + lane]);
        s.Ah[r * LD + lane] = r < n ? a * inv_norm(a2) : 0.f;
        if (lane == 0) s.den[r] = qz < eps ? eps : qz;  // max(., eps), keeping a NaN
      }
      VLA_PHASE(4);

      // P6 (V5): L_S = K Alpha^T strictly lower, QA = Q Alpha^T lower.
      constexpr int kSquare = NP / 16 * (NP / 8);
      product<NP, NP, D, kOps>(row(Kh), rowT(s.Ah), [&](int m, int j, float v) { s.LS[m * LD + j] = j < m ? v : 0.f; }, warp, kWarps, lane);
      product<NP, NP, D, kOps>(row(Qf), rowT(s.Ah), [&](int m, int j, float v) { s.QA[m * LD + j] = j <= m ? v : 0.f; },
                         (warp + kSquare) % kWarps, kWarps, lane);
      VLA_PHASE(5);

      // P7: the residual sweep (warp 0); Y^T D^-1 Y (V4) and the next chunk's features (the rest).
      if (warp == 0) {
        lower_sweep(s.E, s.LS, s.E, lane);
      } else {
        product<D, D, NP, kOps>([&](int m, int k) { return s.Y[k * LD + m] * s.Dinv[k]; }, col(s.Y),
                          [&](int m, int c, float v) { s.dA[m * LD + c] = v; }, warp - 1, kWarps - 1, lane);
        if (nn > 0) features(s, b ^ 1, raw, nn, warp, lane);
      }
      VLA_PHASE(6);

      // P8: the outputs O = (Q S_c^T + QA E) / den, S' = S_c + E^T Alpha (V5), A' = A_c - sym(Y^T D^-1 Y) (V4).
      product<NP, D, NP, kOps>(row(s.QA), col(s.E), [&](int m, int c, float v) {
        if (m >= n) return;
        const float den = s.den[m];
        x.o[base + static_cast<long long>(c0 + m) * D + c] = isfinite(den) ? (s.QS[m * LD + c] + v) / den : __int_as_float(0x7fc00000);
      }, warp, kWarps, lane);
      product<D, D, NP, kOps>([&](int m, int k) { return s.E[k * LD + m]; }, col(s.Ah), [&](int m, int c, float v) { s.S[m * LD + c] += v; },
                        (warp + NP / 16 * (D / 8)) % kWarps, kWarps, lane);
      for (int i = tid; i < D * D; i += kThreads) {
        const int r = i / D, c = i % D;
        // Symmetrised, as the recurrence's z z^T / delta is symmetric in every format.
        s.A[r * LD + c] = s.A[r * LD + c] - 0.5f * (s.dA[r * LD + c] + s.dA[c * LD + r]) + (r == c ? shift : 0.f);
      }
      VLA_PHASE(7);
      c0 = next;
      n = nn;
      b ^= 1;
    }
#ifdef VLA_CHUNKED_VLA_PHASES
    if (lane == 0 && blockIdx.x == 0)
      for (int i = 0; i < 8; ++i) chunked_vla_phase_cycles[warp][i] = phase_cycles[i];
#endif
  }
};

template <int D, int CM, ChunkedVlaOperands kOps>
__global__ void __launch_bounds__(kThreads) chunked_vla_forward_kernel(RecurrentTensors x, RecurrentParams p, int C) {
  extern __shared__ __align__(16) unsigned char smem[];
  ChunkedVla<D, CM, kOps>::run(x, p, C, *reinterpret_cast<ChunkSmem<D, CM>*>(smem));
}

template <int D, int CM, ChunkedVlaOperands kOps>
cudaError_t launch(const RecurrentTensors& x, const RecurrentParams& p, int C, cudaStream_t stream) {
  constexpr int bytes = static_cast<int>(sizeof(ChunkSmem<D, CM>));
  const auto kernel = chunked_vla_forward_kernel<D, CM, kOps>;
  const cudaError_t attr = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (attr != cudaSuccess) return attr;
  kernel<<<x.B * x.H, kThreads, bytes, stream>>>(x, p, C);
  return cudaGetLastError();
}

template <ChunkedVlaOperands kOps> cudaError_t launch_chunk(const RecurrentTensors& x, const RecurrentParams& p, int C, cudaStream_t stream) {
  // The block's matrices are sized for CM >= C rows: the smallest compiled size that holds the chunk.
  if (C <= 16) return launch<32, 16, kOps>(x, p, C, stream);
  if (C <= 20) return launch<32, 20, kOps>(x, p, C, stream);
  return launch<32, 32, kOps>(x, p, C, stream);
}

}  // namespace

int chunked_vla_chunk(int chunk, const RecurrentParams& p) {
  int c = chunk == 0 ? kChunkedVlaMaxChunk : chunk;
  if (p.refresh_period > 0 && p.refresh_period < c) c = p.refresh_period;
  return c;
}

cudaError_t chunked_vla_forward(const RecurrentTensors& x, const RecurrentParams& p, int chunk, ChunkedVlaOperands ops,
                                cudaStream_t stream) {
  if (!x.q || !x.k || !x.v || !x.u || !x.o || x.B < 1 || x.H < 1 || x.T < 1) return cudaErrorInvalidValue;
  if (chunk < 0 || chunk > kChunkedVlaMaxChunk || x.d != 32) return cudaErrorInvalidValue;
  const int C = chunked_vla_chunk(chunk, p);
  return ops == ChunkedVlaOperands::Tf32 ? launch_chunk<ChunkedVlaOperands::Tf32>(x, p, C, stream)
                                         : launch_chunk<ChunkedVlaOperands::Fp32>(x, p, C, stream);
}

}  // namespace vla::gpu
