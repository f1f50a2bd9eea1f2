// The chunkwise-parallel forward of Algorithm 1 on the GPU. The equations (V1)-(V5) are derived in
// docs/chunkwise-vla.md; core/rules/vla/chunked.hpp is the same algorithm on the CPU over any scalar, and
// the GPU tests hold this kernel to the CPU double path (tests/gpu/test_chunked_vla_forward.cpp).
//
// Parallel structure. One thread block owns one (b, h) sequence and walks its chunks in order. Of the chunk
// boundary state, A_c belongs to the A-chain (V1-V4) and S_c, z_c to the S-chain (V5); the S-chain of a
// chunk needs only its alpha_hat from the A-chain, so the block's warps form two groups that run a
// software pipeline: in iteration i, warps 0-7 run the A-chain of chunk i while warps 8-11 run the S-chain
// of chunk i - 1, each group behind its own named barrier, and one block barrier ends the iteration.
// Rows of every chunk matrix are tokens; rows n.. are zero, so every product runs over whole tiles.
//   A1  G = I + U W^T                                                        (V1)
//   A2  warp 0: G = L D L^T (the pivots D_t are Alg. 1's delta_t, clamped as produced, line 13), then
//       Y = L^-1 W by a column sweep (V2); warps 1-7: K A_c and U' A_c (U' the next chunk's directions)
//   A3  M = tril(K Y^T) D^-1, Q = U' Y^T D^-1, Y^T D^-1 Y                      (V3, V4)
//   A4  alpha = K A_c - M Y (+ eta k_hat on the chunk's last token when the refresh follows it) (V3);
//       the next chunk's W' = U' A' = U' A_c - Q Y, so that its A1 need not wait for A' (V1 via V4);
//       A' = A_c - sym(Y^T D^-1 Y) (+ eta I)                                    (V4)
//   S1  alpha_hat = unit(alpha) (line 20); the running key sums z_c + sum_{j<=t} phi(k_j) (D3);
//       QS = Q S_c^T, E = V - K S_c^T                                           (V5)
//   S2  L_S = strictly lower K Alpha^T, QA = lower Q Alpha^T; den_t = max(phi(q_t) . z_t, eps)   (V5, D3)
//   S3  warp 8: E = (I + L_S)^-1 E by a column sweep; warps 9-11: the features (lines 8-10) of chunk
//       i + 2, whose inputs the S warps copied into shared memory (cp.async) at the iteration's start
//   S4  O = (QS + QA E) / den (stored), S' = S_c + E^T Alpha                    (V5)
// The products run on the tensor cores (m16n8k8 TF32 MMAs with fp32 accumulation) at fp32 accuracy by
// default (3xTF32) or with TF32 operands (ChunkedVlaOperands); the factorisation and the two sweeps run
// on one warp each, in registers and shuffles.
#include "gpu/chunked_vla_forward.hpp"

#include "core/phi.hpp"

#include <cuda_pipeline.h>

#include <cmath>

namespace vla::gpu {
namespace {

constexpr int kAWarps = 8;                      // warps 0-7: the A-chain
constexpr int kSWarps = 4;                      // warps 8-11: the S-chain
constexpr int kThreads = 32 * (kAWarps + kSWarps);
constexpr int kABarrier = 1, kSBarrier = 2;     // named barriers (0 is __syncthreads)
constexpr int kRing = 4;                        // feature buffers: chunks i - 1 (S), i, i + 1 (A), i + 2 (being made)
constexpr unsigned kFull = 0xffffffffu;

__device__ __forceinline__ void group_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// A chunk's start c0 -> its length: C tokens, fewer at the end of the sequence, and ending on the next
// refresh step (line 16 after the steps with (t + 1) mod period == 0), as core/rules/vla/chunked.hpp.
__host__ __device__ inline int chunk_length(int c0, int T, int C, int period) {
  int n = C < T - c0 ? C : T - c0;
  if (period > 0 && period - c0 % period < n) n = period - c0 % period;
  return n;
}

// Shared memory of one block: row-major matrices with row stride LD = D + 4 floats (the tensor-core
// fragments, which read 8 rows x 4 columns, then hit 32 banks). Token matrices have NP = CM rounded up to
// 16 rows (the MMA tile's m16); rows n..NP-1 stay zero.
template <int D, int CM> struct ChunkSmem {
  static constexpr int LD = D + 4;
  static constexpr int NP = (CM + 15) / 16 * 16;
  float A[D * LD];   // A_c (d, d), symmetric                 (A-chain)
  float dA[D * LD];  // Y^T D^-1 Y                            (V4)
  float S[D * LD];   // S_c (d_v, d); row i is value coordinate i   (S-chain)
  float z[D];        // z_c, the sum of phi(k) so far
  // The per-token maps of four chunks (Alg. 1 lines 8-10), a ring indexed by chunk number.
  float Qf[kRing][NP * LD];  // phi(q_t)
  float Kf[kRing][NP * LD];  // phi(k_t)
  float Kh[kRing][NP * LD];  // k_hat_t
  float U[kRing][NP * LD];   // u_t = unit(u_raw) / sqrt(d)
  float V[kRing][NP * LD];   // v_t
  float raw[4][CM * D];      // q, k_raw, v, u_raw of the chunk being loaded
  // A-chain
  float W[2][NP * LD];  // U A_c of this chunk, then of the next   (V1)
  float KA[NP * LD];    // K A_c                                   (V3)
  float P[NP * LD];     // U' A_c                                  (V1 of the next chunk)
  float Y[NP * LD];     // L^-1 W, rows A_{t-1} u_t                (V2)
  float G[NP * LD];     // I + U W^T, then L (strictly lower), then tril(K Y^T) D^-1   (V1, V3)
  float Q[NP * LD];     // U' Y^T D^-1
  float Ah[2][NP * LD]; // alpha_t, handed to the S-chain, which makes it alpha_hat_t in place
  float Dinv[NP];       // 1 / D_t
  // S-chain
  float QS[NP * LD];  // Q S_c^T                 (V5)
  float E[NP * LD];   // V - K S_c^T, then the residuals E
  float LS[NP * LD];  // K Alpha^T, strictly lower
  float QA[NP * LD];  // Q Alpha^T, lower
  float Zc[NP * LD];  // z_c + sum_{j<=t} phi(k_j)   (D3)
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
  // Tiles of the (NP, NP), (NP, D) and (D, D) products, for spreading two products over one group's warps.
  static constexpr int kSquareTiles = NP / 16 * (NP / 8);
  static constexpr int kWideTiles = NP / 16 * (D / 8);

  // Copies q, k_raw, v, u_raw of the chunk [c0, c0 + n) into s.raw (cp.async, 16 bytes at a time), by the
  // `threads` threads from `first`; the caller waits with __pipeline_wait_prior(0) and a barrier.
  __device__ static void load_raw(Sm& s, const RecurrentTensors& x, long long base, int c0, int n, int thread, int threads) {
    constexpr int kVec = D / 4;
    for (int i = thread; i < 4 * n * kVec; i += threads) {
      const int a = i / (n * kVec), r = (i / kVec) % n, c = i % kVec * 4;
      const float* src = a == 0 ? x.q : a == 1 ? x.k : a == 2 ? x.v : x.u;
      __pipeline_memcpy_async(&s.raw[a][r * D + c], src + base + static_cast<long long>(c0 + r) * D + c, 16);
    }
    __pipeline_commit();
  }

  // Alg. 1 lines 8-10 for rows first, first + step, ... of the loaded chunk into ring slot f; rows n..CM-1
  // become zero.
  __device__ static void features(Sm& s, int f, int n, int first, int step, int lane) {
    const float u_scale = 1.f / sqrtf(static_cast<float>(D));
    for (int r = first; r < CM; r += step) {
      const bool in = r < n;
      const float q = in ? s.raw[0][r * D + lane] : 0.f, k = in ? s.raw[1][r * D + lane] : 0.f;
      const float v = in ? s.raw[2][r * D + lane] : 0.f, u = in ? s.raw[3][r * D + lane] : 0.f;
      const float qf = elu_plus_one(q), kf = elu_plus_one(k);
      const float k_inv = inv_norm(warp_sum(kf * kf)), u_inv = inv_norm(warp_sum(u * u)) * u_scale;
      const int at = r * LD + lane;
      s.Qf[f][at] = in ? qf : 0.f;
      s.Kf[f][at] = in ? kf : 0.f;
      s.Kh[f][at] = in ? kf * k_inv : 0.f;
      s.U[f][at] = in ? u * u_inv : 0.f;
      s.V[f][at] = in ? v : 0.f;
    }
  }

  // Warp 0 of A2: the unpivoted L D L^T of G, lane i holding row i in registers (right-looking: after
  // pivot j, every row i > j subtracts L_ij L_kj D_j from its entries k in (j, i]), then Y = L^-1 W.
  __device__ static void factor_and_solve(Sm& s, const float* W, float eps, int lane) {
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
    lower_sweep(W, s.G, s.Y, lane);  // (V2)
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

  __device__ static auto row(const float* X) { return [X](int m, int k) { return X[m * LD + k]; }; }   // X as the left factor
  __device__ static auto rowT(const float* X) { return [X](int k, int n) { return X[n * LD + k]; }; }  // X^T as the right factor
  __device__ static auto col(const float* X) { return [X](int k, int n) { return X[k * LD + n]; }; }   // X as the right factor

  // The A-chain of chunk [c0, c0 + n) (features in ring slot f, the next chunk's in fn when has_next),
  // warps 0-7.
  __device__ static void a_chain(Sm& s, int it, int f, int fn, bool has_next, int n, float shift, float eps, int warp, int lane) {
    const float *U = s.U[f], *Kh = s.Kh[f], *Un = s.U[fn], *W = s.W[it & 1];
    float* Wn = s.W[(it + 1) & 1];
    float* Ah = s.Ah[it & 1];
    const auto A = [&](int k, int n) { return s.A[n * LD + k]; };  // A_c symmetric: the conflict-free read

    // A1 (V1): G = I + U W^T.
    product<NP, NP, D, kOps>(row(U), rowT(W), [&](int m, int j, float v) { s.G[m * LD + j] = v + (m == j ? 1.f : 0.f); }, warp, kAWarps,
                             lane);
    group_barrier(kABarrier, 32 * kAWarps);

    // A2: the factorisation and Y (warp 0); K A_c and U' A_c (warps 1-7).
    if (warp == 0) {
      factor_and_solve(s, W, eps, lane);
    } else {
      product<NP, D, D, kOps>(row(Kh), A, [&](int m, int c, float v) { s.KA[m * LD + c] = v; }, warp - 1, kAWarps - 1, lane);
      if (has_next)
        product<NP, D, D, kOps>(row(Un), A, [&](int m, int c, float v) { s.P[m * LD + c] = v; }, (warp - 1 + kWideTiles) % (kAWarps - 1),
                                kAWarps - 1, lane);
    }
    group_barrier(kABarrier, 32 * kAWarps);

    // A3 (V3, V4): M = tril(K Y^T) D^-1 (over G), Q = U' Y^T D^-1, Y^T D^-1 Y.
    product<NP, NP, D, kOps>(row(Kh), rowT(s.Y), [&](int m, int j, float v) { s.G[m * LD + j] = j <= m ? v * s.Dinv[j] : 0.f; }, warp,
                             kAWarps, lane);
    if (has_next)
      product<NP, NP, D, kOps>(row(Un), rowT(s.Y), [&](int m, int j, float v) { s.Q[m * LD + j] = v * s.Dinv[j]; },
                               (warp + kSquareTiles) % kAWarps, kAWarps, lane);
    product<D, D, NP, kOps>([&](int m, int k) { return s.Y[k * LD + m] * s.Dinv[k]; }, col(s.Y),
                            [&](int m, int c, float v) { s.dA[m * LD + c] = v; }, (warp + 2 * kSquareTiles) % kAWarps, kAWarps, lane);
    group_barrier(kABarrier, 32 * kAWarps);

    // A4: alpha (V3), the next chunk's W' = U' A_c - Q Y (= U' A'), A' (V4).
    product<NP, D, NP, kOps>(row(s.G), col(s.Y), [&](int m, int c, float v) {
      // the chunk's last token reads A after the refresh that follows it: + eta k_hat
      Ah[m * LD + c] = s.KA[m * LD + c] - v + (m == n - 1 ? shift * Kh[m * LD + c] : 0.f);
    }, warp, kAWarps, lane);
    if (has_next)
      product<NP, D, NP, kOps>(row(s.Q), col(s.Y), [&](int m, int c, float v) {
        Wn[m * LD + c] = s.P[m * LD + c] - v + (shift != 0.f ? shift * Un[m * LD + c] : 0.f);  // + eta U' after a refresh
      }, (warp + kWideTiles) % kAWarps, kAWarps, lane);
    for (int i = threadIdx.x; i < D * D; i += 32 * kAWarps) {
      const int r = i / D, c = i % D;
      // Symmetrised, as the recurrence's z z^T / delta is symmetric in every format.
      s.A[r * LD + c] = s.A[r * LD + c] - 0.5f * (s.dA[r * LD + c] + s.dA[c * LD + r]) + (r == c ? shift : 0.f);
    }
  }

  // The S-chain of chunk [c0, c0 + n) (features in ring slot f, alpha in Ah), warps 8-11 (w = warp - 8);
  // S3 also makes the features of the chunk in s.raw (rows n_load, ring slot f_load), if load.
  __device__ static void s_chain(Sm& s, const RecurrentTensors& x, long long base, int it, int f, int c0, int n, float eps, bool load,
                                 int f_load, int n_load, int w, int lane) {
    const float *Qf = s.Qf[f], *Kh = s.Kh[f], *V = s.V[f];
    float* Ah = s.Ah[(it - 1) & 1];
    // S1: alpha_hat rows (line 20); key sums (D3, warp 8 after its rows); QS, E (V5).
    for (int r = w; r < CM; r += kSWarps) {
      const float a = Ah[r * LD + lane];
      Ah[r * LD + lane] = r < n ? a * inv_norm(warp_sum(a * a)) : 0.f;
    }
    if (w == 0) {
      const float* __restrict__ Kf = s.Kf[f];
      float zc = s.z[lane];
#pragma unroll 4
      for (int r = 0; r < CM; ++r) {
        zc += Kf[r * LD + lane];  // rows past the chunk are zero
        s.Zc[r * LD + lane] = zc;
      }
      s.z[lane] = zc;
    }
    product<NP, D, D, kOps>(row(Qf), rowT(s.S), [&](int m, int c, float v) { s.QS[m * LD + c] = v; }, w, kSWarps, lane);
    product<NP, D, D, kOps>(row(Kh), rowT(s.S), [&](int m, int c, float v) { s.E[m * LD + c] = V[m * LD + c] - v; },
                            (w + kWideTiles) % kSWarps, kSWarps, lane);
    group_barrier(kSBarrier, 32 * kSWarps);

    // S2: L_S, QA (V5); den (D3).
    product<NP, NP, D, kOps>(row(Kh), rowT(Ah), [&](int m, int j, float v) { s.LS[m * LD + j] = j < m ? v : 0.f; }, w, kSWarps, lane);
    product<NP, NP, D, kOps>(row(Qf), rowT(Ah), [&](int m, int j, float v) { s.QA[m * LD + j] = j <= m ? v : 0.f; },
                             (w + kSquareTiles) % kSWarps, kSWarps, lane);
    for (int r = w; r < CM; r += kSWarps) {
      const float qz = warp_sum(Qf[r * LD + lane] * s.Zc[r * LD + lane]);
      if (lane == 0) s.den[r] = qz < eps ? eps : qz;  // max(., eps), keeping a NaN
    }
    __pipeline_wait_prior(0);
    group_barrier(kSBarrier, 32 * kSWarps);

    // S3: the residual sweep (warp 8); the loaded chunk's features (warps 9-11).
    if (w == 0) lower_sweep(s.E, s.LS, s.E, lane);
    else if (load) features(s, f_load, n_load, w - 1, kSWarps - 1, lane);
    group_barrier(kSBarrier, 32 * kSWarps);

    // S4: O (stored) and S' (V5).
    product<NP, D, NP, kOps>(row(s.QA), col(s.E), [&](int m, int c, float v) {
      if (m >= n) return;
      const float den = s.den[m];
      x.o[base + static_cast<long long>(c0 + m) * D + c] = isfinite(den) ? (s.QS[m * LD + c] + v) / den : __int_as_float(0x7fc00000);
    }, w, kSWarps, lane);
    product<D, D, NP, kOps>([&](int m, int k) { return s.E[k * LD + m]; }, col(Ah), [&](int m, int c, float v) { s.S[m * LD + c] += v; },
                            (w + kWideTiles) % kSWarps, kSWarps, lane);
  }

  __device__ static void run(const RecurrentTensors& x, const RecurrentParams& p, int C, Sm& s) {
    const int T = x.T, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const long long base = static_cast<long long>(blockIdx.x) * T * D;
    const int period = p.refresh_period;
    const auto length = [&](int c0) { return c0 < T ? chunk_length(c0, T, C, period) : 0; };

    float* all = reinterpret_cast<float*>(&s);
    for (int i = tid; i < static_cast<int>(sizeof(Sm) / sizeof(float)); i += kThreads) all[i] = 0.f;  // padding rows stay 0
    __syncthreads();
    if (tid < D) s.A[tid * LD + tid] = 1.f / p.lambda0;  // line 4
    // Prologue: the features of chunks 0 and 1, and W of chunk 0.
    int start[4] = {T, 0, 0, 0};  // chunks i - 1, i, i + 1, i + 2 (T: none)
    start[2] = start[1] + length(start[1]);
    start[3] = start[2] + length(start[2]);
    for (int c = 1; c <= 2; ++c) {
      if (start[c] < T) load_raw(s, x, base, start[c], length(start[c]), tid, kThreads);
      __pipeline_wait_prior(0);
      __syncthreads();
      if (start[c] < T) features(s, c - 1, length(start[c]), warp, kAWarps + kSWarps, lane);
      __syncthreads();
    }
    if (warp < kAWarps)
      product<NP, D, D, kOps>(row(s.U[0]), [&](int k, int n) { return s.A[n * LD + k]; },
                              [&](int m, int c, float v) { s.W[0][m * LD + c] = v; }, warp, kAWarps, lane);
    __syncthreads();

    for (int it = 0; start[0] < T || start[1] < T; ++it) {
      if (warp < kAWarps) {
        if (start[1] < T) {
          const int n = length(start[1]), next = start[1] + n;
          const float shift = period > 0 && next % period == 0 ? p.refresh_eta : 0.f;
          a_chain(s, it, it % kRing, (it + 1) % kRing, start[2] < T, n, shift, p.eps, warp, lane);
        }
      } else {
        const int w = warp - kAWarps;
        const bool load = start[3] < T;
        if (load) load_raw(s, x, base, start[3], length(start[3]), tid - 32 * kAWarps, 32 * kSWarps);
        if (start[0] < T) {
          s_chain(s, x, base, it, (it + kRing - 1) % kRing, start[0], length(start[0]), p.eps, load, (it + 2) % kRing, length(start[3]),
                  w, lane);
        } else if (load) {  // the first iteration: no chunk i - 1, only the loads
          __pipeline_wait_prior(0);
          group_barrier(kSBarrier, 32 * kSWarps);
          features(s, (it + 2) % kRing, length(start[3]), w, kSWarps, lane);
        }
      }
      __syncthreads();
      start[0] = start[1];
      start[1] = start[2];
      start[2] = start[3];
      start[3] = start[3] + length(start[3]);
    }
  }
};

template <int D, int CM, ChunkedVlaOperands kOps>
__global__ void __launch_bounds__(kThreads, 1) chunked_vla_forward_kernel(RecurrentTensors x, RecurrentParams p, int C) {
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
