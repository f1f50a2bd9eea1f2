// The chunkwise-parallel forward of Algorithm 1 on the GPU. The equations (V1)-(V5) are derived in
// docs/chunkwise-vla.md; core/rules/vla/chunked.hpp is the same algorithm on the CPU over any scalar, and
// the GPU tests hold this kernel to the CPU double path (tests/gpu/test_chunked_vla_forward.cpp).
//
// Parallel structure. One thread block owns one (b, h) sequence and walks its chunks in order: the chunk
// boundary state (A_c, S_c, z_c) is the only thing carried, in shared memory. Within a chunk of n <= CM
// tokens (rows of every chunk matrix are tokens; rows n..CM-1 are zero, so every loop runs to CM):
//   P2  G = I + U W^T                         (V1), lower triangle
//   P3  warp 0:  G = L D L^T (the pivots D_t are Alg. 1's delta_t, clamped as produced, line 13),
//                then Y = L^-1 W by a column sweep  (V2)
//       warp 1:  the read's denominators den_t = max(phi(q_t) . (z_c + sum_{j<=t} phi(k_j)), eps)
//                and z for the next chunk          (D3, lines 24-26)
//       others:  QS = Q S_c^T and E = V - K S_c^T   (V5's right-hand side)
//   P5  one warp per token: alpha_t = (K A_c)_t - sum_{j<=t} (k_hat_t . y_j) / D_j y_j  (V3), + eta k_hat_t
//       when the refresh falls on the chunk's last token; alpha_hat_t = unit(alpha_t) (line 20)
//   P6  L_S = strictly lower K Alpha^T, QA = lower Q Alpha^T                 (V5)
//   P7  warp 0:  E = (I + L_S)^-1 E by a column sweep                        (V5)
//       others:  A' = A_c - Y^T D^-1 Y (+ eta I on a refresh)                 (V4);
//                the next chunk's features from the inputs prefetched at the top of this chunk
//   P8  O = (QS + QA E) / den (stored), S' = S_c + E^T Alpha (V5), and the next chunk's W = U' A',
//       K' A' (its V1 and V3 products), so a chunk costs six block barriers.
// The two triangular sweeps and the factorisation are the only sequential parts: each is CM steps of
// one warp, registers and shuffles, no block barrier inside.
#include "gpu/chunked_vla_forward.hpp"

#include "core/phi.hpp"

#include <cmath>

namespace vla::gpu {
namespace {

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

// Shared memory of one block. Row-major with row stride LD = D + 1, so that the products which read a
// matrix by rows across the lanes (lane j reading row j) hit 32 different banks.
template <int D, int CM> struct ChunkSmem {
  static constexpr int LD = D + 1;
  float A[D * LD];   // A_c (d, d), symmetric
  float S[D * LD];   // S_c (d_v, d); row i is value coordinate i
  float z[D];        // z_c, the sum of phi(k) so far
  // The chunk's per-token maps (Alg. 1 lines 8-10), double-buffered: the next chunk's are made during this one.
  float Qf[2][CM * LD];  // phi(q_t)
  float Kf[2][CM * LD];  // phi(k_t)
  float Kh[2][CM * LD];  // k_hat_t
  float U[2][CM * LD];   // u_t = unit(u_raw) / sqrt(d)
  float V[2][CM * LD];   // v_t
  float W[CM * LD];   // U A_c                 (V1)
  float KA[CM * LD];  // K A_c                 (V3)
  float Y[CM * LD];   // L^-1 W, rows A_{t-1} u_t   (V2)
  float Ah[CM * LD];  // alpha_hat_t           (V3, line 20)
  float QS[CM * LD];  // Q S_c^T               (V5)
  float E[CM * LD];   // V - K S_c^T, then the residuals E   (V5)
  float G[CM * LD];   // I + U W^T (lower), then L (strictly lower)   (V1)
  float LS[CM * LD];  // K Alpha^T, strictly lower   (V5)
  float QA[CM * LD];  // Q Alpha^T, lower            (V5)
  float Dinv[CM];     // 1 / D_t
  float den[CM];      // the read's denominators
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

template <int D, int CM> struct ChunkedVla {
  using Sm = ChunkSmem<D, CM>;
  static constexpr int LD = Sm::LD;
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

  // W = U A, KA = K A for feature buffer b (rows of A read across the lanes: A symmetric, A[k][c] = A[c][k]).
  __device__ static void penalty_products(Sm& s, int b, int tid) {
    for (int i = tid; i < 2 * CM * D; i += kThreads) {
      const int which = i / (CM * D), r = (i / D) % CM, c = i % D;
      const float* a = (which == 0 ? s.U[b] : s.Kh[b]) + r * LD;
      float acc = 0.f;
#pragma unroll 8
      for (int k = 0; k < D; ++k) acc = fmaf(a[k], s.A[k * LD + c], acc);
      (which == 0 ? s.W : s.KA)[r * LD + c] = acc;
    }
  }

  // Warp 0 of P3: the unpivoted L D L^T of G, lane i holding row i in registers (right-looking: after
  // pivot j, every row i > j subtracts L_ij L_kj D_j from its entries k in (j, i]), then Y = L^-1 W.
  __device__ static void factor_and_solve(Sm& s, float eps, int lane) {
    float g[CM];
#pragma unroll
    for (int j = 0; j < CM; ++j) g[j] = lane < CM && j <= lane ? s.G[lane * LD + j] : 0.f;
#pragma unroll
    for (int j = 0; j < CM; ++j) {
      float djj = __shfl_sync(kFull, g[j], j);  // G'_jj, from lane j
      djj = djj >= eps ? djj : eps;              // line 13's clamp, applied as the pivot is produced (NaN -> eps)
      const float inv = 1.f / djj;
      const float gij = g[j];                    // G'_ij = L_ij D_j on lanes i > j
      const float lij = lane > j ? gij * inv : 0.f;
#pragma unroll
      for (int k = j + 1; k < CM; ++k) {
        const float gkj = __shfl_sync(kFull, gij, k);
        if (k <= lane) g[k] = fmaf(-lij, gkj, g[k]);
      }
      if (lane > j && lane < CM) s.G[lane * LD + j] = lij;
      if (lane == j) s.Dinv[j] = inv;
    }
    __syncwarp();
    // (V2) Y = L^-1 W: lane = column, rows swept in order, each finished row subtracted from the rest.
    float acc[CM];
#pragma unroll
    for (int i = 0; i < CM; ++i) acc[i] = s.W[i * LD + lane];
#pragma unroll
    for (int j = 0; j < CM; ++j) {
      s.Y[j * LD + lane] = acc[j];
#pragma unroll
      for (int i = j + 1; i < CM; ++i) acc[i] = fmaf(-s.G[i * LD + j], acc[j], acc[i]);
    }
  }

  // Warp 0 of P7: E = (I + L_S)^-1 E in place, lane = value coordinate.
  __device__ static void residual_solve(Sm& s, int lane) {
    float acc[CM];
#pragma unroll
    for (int i = 0; i < CM; ++i) acc[i] = s.E[i * LD + lane];
#pragma unroll
    for (int j = 0; j < CM; ++j) {
      s.E[j * LD + lane] = acc[j];
#pragma unroll
      for (int i = j + 1; i < CM; ++i) acc[i] = fmaf(-s.LS[i * LD + j], acc[j], acc[i]);
    }
  }

  // Warp 1 of P3: den_t and the key sum, lane = key coordinate (D3, lines 24-26).
  __device__ static void denominators(Sm& s, int b, float eps, int lane) {
    float zc = s.z[lane];
#pragma unroll 4
    for (int r = 0; r < CM; ++r) {
      zc += s.Kf[b][r * LD + lane];  // rows past the chunk are zero
      const float qz = warp_sum(s.Qf[b][r * LD + lane] * zc);
      if (lane == 0) s.den[r] = qz < eps ? eps : qz;  // max(., eps), keeping a NaN
    }
    s.z[lane] = zc;
  }

  __device__ static void run(const RecurrentTensors& x, const RecurrentParams& p, int C, Sm& s) {
    const int T = x.T, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const long long base = static_cast<long long>(blockIdx.x) * T * D;
    const float eps = p.eps;
    const int period = p.refresh_period;

    for (int i = tid; i < D * D; i += kThreads) {
      const int r = i / D, c = i % D;
      s.A[r * LD + c] = r == c ? 1.f / p.lambda0 : 0.f;  // line 4
      s.S[r * LD + c] = 0.f;
    }
    if (tid < D) s.z[tid] = 0.f;
    Raw raw;
    int c0 = 0, n = chunk_length(0, T, C, period), b = 0;
    if (warp > 0) {
      prefetch(raw, x, base, 0, n, warp, lane);
      features(s, 0, raw, n, warp, lane);
    }
    __syncthreads();
    penalty_products(s, 0, tid);
    __syncthreads();

    while (c0 < T) {
      const int next = c0 + n;
      const int nn = next < T ? chunk_length(next, T, C, period) : 0;
      const float shift = period > 0 && next % period == 0 ? p.refresh_eta : 0.f;
      if (warp > 0 && nn > 0) prefetch(raw, x, base, next, nn, warp, lane);
      const float *Qf = s.Qf[b], *Kh = s.Kh[b], *U = s.U[b], *V = s.V[b];

      // P2 (V1): G = I + U W^T, lower triangle.
      for (int i = tid; i < CM * CM; i += kThreads) {
        const int r = i / CM, j = i % CM;
        if (j > r) continue;
        float acc = r == j ? 1.f : 0.f;
#pragma unroll 8
        for (int k = 0; k < D; ++k) acc = fmaf(U[r * LD + k], s.W[j * LD + k], acc);
        s.G[r * LD + j] = acc;
      }
      __syncthreads();

      // P3: the factorisation and Y (warp 0), the denominators (warp 1), Q S^T and V - K S^T (the rest).
      if (warp == 0) {
        factor_and_solve(s, eps, lane);
      } else if (warp == 1) {
        denominators(s, b, eps, lane);
      } else {
        for (int i = tid - 64; i < 2 * CM * D; i += kThreads - 64) {
          const int which = i / (CM * D), r = (i / D) % CM, c = i % D;
          const float* a = (which == 0 ? Qf : Kh) + r * LD;
          float acc = 0.f;
#pragma unroll 8
          for (int k = 0; k < D; ++k) acc = fmaf(a[k], s.S[c * LD + k], acc);
          if (which == 0) s.QS[r * LD + c] = acc;
          else s.E[r * LD + c] = V[r * LD + c] - acc;
        }
      }
      __syncthreads();

      // P5 (V3, line 20): one warp per token t; lane j first forms (k_hat_t . y_j) / D_j.
      for (int r = warp; r < CM; r += kWarps) {
        float m = 0.f;
        if (lane < CM && lane <= r) {
#pragma unroll 8
          for (int k = 0; k < D; ++k) m = fmaf(Kh[r * LD + k], s.Y[lane * LD + k], m);
          m *= s.Dinv[lane];
        }
        float a = s.KA[r * LD + lane];
#pragma unroll
        for (int j = 0; j < CM; ++j) {
          const float mj = __shfl_sync(kFull, m, j);
          if (j <= r) a = fmaf(-mj, s.Y[j * LD + lane], a);
        }
        if (r == n - 1) a = fmaf(shift, Kh[r * LD + lane], a);  // the last token reads A after its refresh
        const float inv = inv_norm(warp_sum(a * a));
        s.Ah[r * LD + lane] = r < n ? a * inv : 0.f;
      }
      __syncthreads();

      // P6 (V5): L_S = K Alpha^T strictly lower, QA = Q Alpha^T lower.
      for (int i = tid; i < 2 * CM * CM; i += kThreads) {
        const int which = i / (CM * CM), r = (i / CM) % CM, j = i % CM;
        if (j > r || (which == 0 && j == r)) continue;
        const float* a = (which == 0 ? Kh : Qf) + r * LD;
        float acc = 0.f;
#pragma unroll 8
        for (int k = 0; k < D; ++k) acc = fmaf(a[k], s.Ah[j * LD + k], acc);
        (which == 0 ? s.LS : s.QA)[r * LD + j] = acc;
      }
      __syncthreads();

      // P7: the residual sweep (warp 0); A' (V4) and the next chunk's features (the rest).
      if (warp == 0) {
        residual_solve(s, lane);
      } else {
        for (int i = tid - 32; i < D * D; i += kThreads - 32) {
          const int r = i / D, c = i % D;
          float acc = 0.f;
#pragma unroll 4
          for (int t = 0; t < CM; ++t) acc = fmaf(s.Y[t * LD + r] * s.Y[t * LD + c], s.Dinv[t], acc);  // symmetric bit for bit
          s.A[r * LD + c] = s.A[r * LD + c] - acc + (r == c ? shift : 0.f);
        }
        if (nn > 0) features(s, b ^ 1, raw, nn, warp, lane);
      }
      __syncthreads();

      // P8: the outputs, S' (V5), and the next chunk's V1/V3 products with A'.
      for (int i = tid; i < CM * D; i += kThreads) {
        const int r = i / D, c = i % D;
        if (r >= n) break;  // rows are warp-uniform (D = 32)
        float acc = s.QS[r * LD + c];
#pragma unroll 4
        for (int j = 0; j < CM; ++j)
          if (j <= r) acc = fmaf(s.QA[r * LD + j], s.E[j * LD + c], acc);
        const float den = s.den[r];
        x.o[base + static_cast<long long>(c0 + r) * D + c] = isfinite(den) ? acc / den : __int_as_float(0x7fc00000);
      }
      for (int i = tid; i < D * D; i += kThreads) {
        const int r = i / D, c = i % D;
        float acc = s.S[r * LD + c];
#pragma unroll 4
        for (int t = 0; t < CM; ++t) acc = fmaf(s.E[t * LD + r], s.Ah[t * LD + c], acc);
        s.S[r * LD + c] = acc;
      }
      if (nn > 0) penalty_products(s, b ^ 1, tid);
      __syncthreads();
      c0 = next;
      n = nn;
      b ^= 1;
    }
  }
};

template <int D, int CM>
__global__ void __launch_bounds__(kThreads) chunked_vla_forward_kernel(RecurrentTensors x, RecurrentParams p, int C) {
  extern __shared__ __align__(16) unsigned char smem[];
  ChunkedVla<D, CM>::run(x, p, C, *reinterpret_cast<ChunkSmem<D, CM>*>(smem));
}

template <int D, int CM> cudaError_t launch(const RecurrentTensors& x, const RecurrentParams& p, int C, cudaStream_t stream) {
  constexpr int bytes = static_cast<int>(sizeof(ChunkSmem<D, CM>));
  const cudaError_t attr = cudaFuncSetAttribute(chunked_vla_forward_kernel<D, CM>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (attr != cudaSuccess) return attr;
  chunked_vla_forward_kernel<D, CM><<<x.B * x.H, kThreads, bytes, stream>>>(x, p, C);
  return cudaGetLastError();
}

}  // namespace

int chunked_vla_chunk(int chunk, const RecurrentParams& p) {
  int c = chunk == 0 ? kChunkedVlaMaxChunk : chunk;
  if (p.refresh_period > 0 && p.refresh_period < c) c = p.refresh_period;
  return c;
}

cudaError_t chunked_vla_forward(const RecurrentTensors& x, const RecurrentParams& p, int chunk, cudaStream_t stream) {
  if (!x.q || !x.k || !x.v || !x.u || !x.o || x.B < 1 || x.H < 1 || x.T < 1) return cudaErrorInvalidValue;
  if (chunk < 0 || chunk > kChunkedVlaMaxChunk || x.d != 32) return cudaErrorInvalidValue;
  const int C = chunked_vla_chunk(chunk, p);
  // The block's matrices are sized for CM >= C rows: the smallest compiled size that holds the chunk.
  if (C <= 16) return launch<32, 16>(x, p, C, stream);
  if (C <= 20) return launch<32, 20>(x, p, C, stream);
  return launch<32, 32>(x, p, C, stream);
}

}  // namespace vla::gpu
