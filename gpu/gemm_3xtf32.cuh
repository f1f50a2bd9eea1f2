#pragma once
// The kernels behind gpu/gemm_3xtf32.hpp, templated over the operand layouts and the passes so that the
// development driver (gpu/dev/gemm_3xtf32_probe.cu) times the same code with one TF32 pass and with the three
// passes chained along a whole k tile. CUDA source: included by .cu files only.
//
// Tiling: a block of 4 warps computes a 64 x 64 tile of C, each warp 32 x 32 as 2 x 4 mma tiles of 16 x 8
// (gpu/tf32_mma.cuh: the split, the passes, the fragments), over k tiles of 32 staged in shared memory; the
// next tile's global reads are in flight while this one's products run.
#include "gpu/gemm_3xtf32.hpp"
#include "gpu/tf32_mma.cuh"

#include <algorithm>

namespace vla::gpu::gemm {

// Split3: the three passes, each k block of 8 summed from zero and added in fp32; Split3Chained: the passes
// accumulated on the tensor core along a whole k tile of 32; One: one TF32 pass.
enum class Passes { Split3, Split3Chained, One };

constexpr int BM = 64, BN = 64, BK = 32, kThreads = 128;
constexpr int kTargetBlocks = 4 * 132;        // split-K aims at ~4 blocks per SM of an H100; a constant, not a
                                              // device query, so that the summation order is the shape's alone

// K is cut into `splits` slices of k_per_split (a multiple of BK, at least 4 k tiles; the last may be
// shorter, none is empty) until the launch has ~kTargetBlocks blocks.
struct Plan {
  int splits = 1, k_per_split = 0;
  Plan(int M, int N, int K) {
    const int tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN), ktiles = (K + BK - 1) / BK;
    const long long want = (static_cast<long long>(ktiles) * tiles + kTargetBlocks - 1) / kTargetBlocks;
    const int kt_per = static_cast<int>(std::max<long long>(4, want));
    splits = (ktiles + kt_per - 1) / kt_per;
    k_per_split = kt_per * BK;
  }
};

// n / d for 0 <= n < 2^31 as one wide multiply and a shift, the divisor's reciprocal rounded up on the host:
// with l = ceil(log2 d) and m = ceil(2^(31 + l) / d) (< 2^32), n / d = (n m) >> (31 + l) for every such n,
// since m d - 2^(31 + l) < d makes n m / 2^(31 + l) exceed n / d by less than n / 2^(31 + l) < 2^-l <= 1 / d.
// A head-major offset takes two divisions, and a `/` by a value known only at run time is a long instruction
// sequence, which each thread would run for every float4 it fetches and every pair of C it stores.
struct Divisor {
  int d = 1;
  unsigned m = 1u << 31;
  int shift = 31;
  Divisor() = default;
  explicit Divisor(int divisor) : d(divisor) {
    int l = 0;
    while ((1LL << l) < divisor) ++l;
    shift = 31 + l;
    m = static_cast<unsigned>(((1ULL << shift) + static_cast<unsigned long long>(divisor) - 1) / static_cast<unsigned long long>(divisor));
  }
  __device__ int div(int n) const { return static_cast<int>((static_cast<unsigned long long>(static_cast<unsigned>(n)) * m) >> shift); }
};

// A head-major matrix's offset (gpu/gemm_3xtf32.hpp: entry (r, c) of group g at g rows H d + ((b H + h) T + t)
// d + j) as a row part b H T d + t d plus a column part g rows H d + h T d + j, so that a thread works out each
// of its rows and columns once.
struct HeadIndex {
  bool on = false;
  Divisor T, d, group_cols;     // group_cols: H d
  long long seq_stride = 0;     // H T d
  long long group_stride = 0;   // rows H d: one tensor
  int head_stride = 0;          // T d
  HeadIndex() = default;
  HeadIndex(HeadMajor h, int rows, int cols) : on(h.on()) {
    if (!on) return;
    const int hd = cols / h.groups;
    T = Divisor(h.T);
    d = Divisor(h.d);
    group_cols = Divisor(hd);
    head_stride = h.T * h.d;
    seq_stride = static_cast<long long>(hd / h.d) * head_stride;
    group_stride = static_cast<long long>(rows) * hd;
  }
  __device__ long long row(int r) const {
    const int b = T.div(r);
    return b * seq_stride + static_cast<long long>(r - b * T.d) * d.d;
  }
  __device__ long long col(int c) const {
    const int g = group_cols.div(c), in_group = c - g * group_cols.d, h = d.div(in_group);
    return g * group_stride + static_cast<long long>(h) * head_stride + (in_group - h * d.d);
  }
};
// The product's three matrices' indices (A and B as stored), and which are head-major as a kernel's template
// argument (a bit each: the indices of a dense matrix are never computed, so they hold no registers).
struct HeadIndices {
  HeadIndex a, b, c;
};
constexpr unsigned kHeadsA = 1, kHeadsB = 2, kHeadsC = 4;

// An operand entry as the passes read it: split (three passes), or its bits as they are (one pass: the
// tensor core reads the leading 11).
template <Passes P> __device__ __forceinline__ Tf32 operand(float x) {
  if constexpr (P == Passes::One) return {__float_as_uint(x), 0u};
  else return tf32_split(x);
}

// An operand tile as it is stored: kOuter rows of kInner entries along the operand's contiguous index, in
// shared memory with a row stride whose fragment reads hit 32 distinct banks (kInner + 4 for 32, + 8 for 64).
// A is [m][k] (row-major) or [k][m] (column-major), B [k][n] or [n][k], so that every global read is a float4
// along the contiguous index.
template <int kOuter, int kInner> struct StoredTile {
  static constexpr int kVecs = kInner / 4;  // float4 per row
  float v[kOuter][kInner + (kInner == BK ? 4 : 8)];
  // Float4 i (0..3) of this thread: the tile at (o0, i0) of an (outer_n x inner_n) matrix stored row-major or
  // head-major (hm); a float4 past the matrix reads as zeros (both extents are multiples of 4, so a float4 is
  // wholly in or out).
  template <bool kHeads>
  static __device__ float4 fetch(const float* P, int outer_n, int inner_n, int o0, int i0, int i, const HeadIndex& hi) {
    const int idx = threadIdx.x + kThreads * i, o = o0 + idx / kVecs, in = i0 + 4 * (idx % kVecs);
    if (o >= outer_n || in >= inner_n) return make_float4(0.f, 0.f, 0.f, 0.f);
    const long long at = kHeads ? hi.row(o) + hi.col(in) : static_cast<long long>(o) * inner_n + in;
    return *reinterpret_cast<const float4*>(P + at);
  }
  __device__ void store(float4 x, int i) {
    const int idx = threadIdx.x + kThreads * i;
    *reinterpret_cast<float4*>(&v[idx / kVecs][4 * (idx % kVecs)]) = x;
  }
};
template <MatrixLayout L> struct ATile : StoredTile<L == MatrixLayout::RowMajor ? BM : BK, L == MatrixLayout::RowMajor ? BK : BM> {
  static constexpr bool kRow = L == MatrixLayout::RowMajor;
  __device__ float at(int m, int k) const { return kRow ? this->v[m][k] : this->v[k][m]; }
  template <bool kHeads> __device__ static float4 fetch(const float* A, int M, int K, int m0, int k0, int i, const HeadIndex& hi) {
    using S = typename ATile::StoredTile;
    return kRow ? S::template fetch<kHeads>(A, M, K, m0, k0, i, hi) : S::template fetch<kHeads>(A, K, M, k0, m0, i, hi);
  }
};
template <MatrixLayout L> struct BTile : StoredTile<L == MatrixLayout::RowMajor ? BK : BN, L == MatrixLayout::RowMajor ? BN : BK> {
  static constexpr bool kRow = L == MatrixLayout::RowMajor;
  __device__ float at(int k, int n) const { return kRow ? this->v[k][n] : this->v[n][k]; }
  template <bool kHeads> __device__ static float4 fetch(const float* B, int N, int K, int n0, int k0, int i, const HeadIndex& hi) {
    using S = typename BTile::StoredTile;
    return kRow ? S::template fetch<kHeads>(B, K, N, k0, n0, i, hi) : S::template fetch<kHeads>(B, N, K, n0, k0, i, hi);
  }
};

// The A (M x K) and B (K x N) tiles at (m0, k0) and (k0, n0): 512 float4 each, 4 per thread, held in
// registers from their global read to their shared store.
template <MatrixLayout LA, MatrixLayout LB> struct TileLoads {
  float4 a[4], b[4];
  template <unsigned kHeads>
  __device__ void fetch(const float* A, const float* B, int M, int N, int K, int m0, int n0, int k0, const HeadIndices& h) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      a[i] = ATile<LA>::template fetch<(kHeads & kHeadsA) != 0>(A, M, K, m0, k0, i, h.a);
      b[i] = BTile<LB>::template fetch<(kHeads & kHeadsB) != 0>(B, N, K, n0, k0, i, h.b);
    }
  }
  __device__ void store(ATile<LA>& as, BTile<LB>& bs) const {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      as.store(a[i], i);
      bs.store(b[i], i);
    }
  }
};

// C = A B + beta C (+ bias) over the k range of slice blockIdx.z, or with gridDim.z > 1 that slice's partial
// product into work[z] (M x N, row-major); with rsum, the blocks of the first column of tiles sum their A
// rows too, into rsum (+=) or, split, into work[splits M N + z M]. kMinBlocks: the blocks per SM the
// registers are allotted for (0: the compiler's choice, 184-188 registers and 2 blocks; 3: 168 registers, a
// few spilled).
// kHeads: which matrices are head-major (kHeadsA | kHeadsB | kHeadsC; 0 for the dense product). The indices
// stay in the parameter bank (__grid_constant__: read where used).
template <MatrixLayout LA, MatrixLayout LB, Passes P, int kMinBlocks, unsigned kHeads>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    gemm_kernel(const float* A, const float* B, float* C, float* work, int M, int N, int K, int k_per_split, float beta, const float* bias,
                float* rsum, const __grid_constant__ HeadIndices heads) {
  __shared__ __align__(16) ATile<LA> as;
  __shared__ __align__(16) BTile<LB> bs;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN, wm = 32 * (warp >> 1), wn = 32 * (warp & 1);
  const int k_begin = blockIdx.z * k_per_split, k_end = min(K, k_begin + k_per_split);
  float acc[2][4][4] = {};
  const bool row_summer = rsum != nullptr && blockIdx.x == 0 && threadIdx.x < BM;  // thread r sums A's row m0 + r
  float row_sum = 0.f;
  TileLoads<LA, LB> ld;
  ld.template fetch<kHeads>(A, B, M, N, K, m0, n0, k_begin, heads);
  for (int k0 = k_begin; k0 < k_end; k0 += BK) {
    __syncthreads();  // the last tile's readers are done
    ld.store(as, bs);
    __syncthreads();
    if (k0 + BK < k_end) ld.template fetch<kHeads>(A, B, M, N, K, m0, n0, k0 + BK, heads);  // in flight under this tile's products
    if (row_summer) {
#pragma unroll 8
      for (int k = 0; k < BK; ++k) row_sum += as.at(threadIdx.x, k);  // zeros past K
    }
    float chain[2][4][4] = {};
#pragma unroll
    for (int kb = 0; kb < BK; kb += 8) {
      Tf32 af[2][4], bf[4][2];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        const int r = wm + 16 * mi + g;
        af[mi][0] = operand<P>(as.at(r, kb + t));
        af[mi][1] = operand<P>(as.at(r + 8, kb + t));
        af[mi][2] = operand<P>(as.at(r, kb + t + 4));
        af[mi][3] = operand<P>(as.at(r + 8, kb + t + 4));
      }
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        const int c = wn + 8 * ni + g;
        bf[ni][0] = operand<P>(bs.at(kb + t, c));
        bf[ni][1] = operand<P>(bs.at(kb + t + 4, c));
      }
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
          const Tf32(&a)[4] = af[mi];
          const Tf32(&b)[2] = bf[ni];
          if constexpr (P == Passes::One) {
            mma_tf32(acc[mi][ni], a[0].hi, a[1].hi, a[2].hi, a[3].hi, b[0].hi, b[1].hi);
          } else if constexpr (P == Passes::Split3) {
            mma_3xtf32(acc[mi][ni], a, b);  // one k block summed from zero, then added in fp32
          } else {  // the passes accumulated on the tensor core along the k tile, added in fp32 after it
            float (&c)[4] = chain[mi][ni];
            mma_tf32(c, a[0].lo, a[1].lo, a[2].lo, a[3].lo, b[0].hi, b[1].hi);
            mma_tf32(c, a[0].hi, a[1].hi, a[2].hi, a[3].hi, b[0].lo, b[1].lo);
            mma_tf32(c, a[0].hi, a[1].hi, a[2].hi, a[3].hi, b[0].hi, b[1].hi);
          }
        }
    }
    if constexpr (P == Passes::Split3Chained) {
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni)
#pragma unroll
          for (int r = 0; r < 4; ++r) acc[mi][ni][r] += chain[mi][ni][r];
    }
  }
  const bool split = gridDim.z > 1;
  if (row_summer && m0 + static_cast<int>(threadIdx.x) < M) {
    const int m = m0 + threadIdx.x;
    if (split) work[static_cast<long long>(gridDim.z) * M * N + static_cast<long long>(blockIdx.z) * M + m] = row_sum;
    else rsum[m] += row_sum;
  }
  float* out = split ? work + static_cast<long long>(blockIdx.z) * M * N : C;
  // Head-major C: an entry's offset is its row's part plus its column's (HeadIndex), (n, n + 1) in one head, d
  // being even; the slices' partial products are dense.
  const bool c_heads = (kHeads & kHeadsC) && !split;
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int m = m0 + wm + 16 * mi + g + 8 * h;
      if (m >= M) continue;
      const long long row_at = c_heads ? heads.c.row(m) : static_cast<long long>(m) * N;
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        const int n = n0 + wn + 8 * ni + 2 * t;
        if (n >= N) continue;  // N is even: (n, n + 1) is wholly in or out
        const long long at = row_at + (c_heads ? heads.c.col(n) : n);
        float2 v = make_float2(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]);
        if (!split && beta != 0.f) {
          const float2 old = *reinterpret_cast<const float2*>(out + at);
          v.x = fmaf(beta, old.x, v.x);
          v.y = fmaf(beta, old.y, v.y);
        }
        if (!split && bias) {
          v.x += bias[n];
          v.y += bias[n + 1];
        }
        *reinterpret_cast<float2*>(out + at) = v;
      }
    }
}

__device__ __forceinline__ void add_to(float& s, float r) { s += r; }
__device__ __forceinline__ void add_to(float4& s, const float4& r) { s.x += r.x; s.y += r.y; s.z += r.z; s.w += r.w; }

// The slices' partial values at w[0], w[stride], ... added in slice order, 8 reads in flight at once (a split
// dW has up to ~50 slices).
template <class V> __device__ __forceinline__ V sum_slices(const V* w, long long stride, int splits) {
  V s = w[0];
  int z = 1;
  for (; z + 8 <= splits; z += 8) {
    V r[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) r[j] = w[(z + j) * stride];
#pragma unroll
    for (int j = 0; j < 8; ++j) add_to(s, r[j]);
  }
  for (; z < splits; ++z) add_to(s, w[z * stride]);
  return s;
}

// C = the slices' partial products added in slice order + beta C (+ bias), a float4 per thread (C dense or
// head-major: the float4 lies in one head); then, with rsum, one thread per row m: rsum[m] += the slices' row
// sums in order.
static __global__ void __launch_bounds__(256) reduce_slices_kernel(const float* work, float* C, int M, int N, int splits, float beta,
                                                                   const float* bias, float* rsum, const HeadIndex c_heads) {
  const long long mn4 = static_cast<long long>(M) * N / 4;
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i < mn4) {
    float4 s = sum_slices(reinterpret_cast<const float4*>(work) + i, mn4, splits);
    float4* c_at = reinterpret_cast<float4*>(C) + i;
    if (c_heads.on) {
      const long long e = 4 * i;
      c_at = reinterpret_cast<float4*>(C + c_heads.row(static_cast<int>(e / N)) + c_heads.col(static_cast<int>(e % N)));
    }
    if (beta != 0.f) {
      const float4 c = *c_at;
      s.x = fmaf(beta, c.x, s.x); s.y = fmaf(beta, c.y, s.y); s.z = fmaf(beta, c.z, s.z); s.w = fmaf(beta, c.w, s.w);
    }
    if (bias) {
      const int n = static_cast<int>((4 * i) % N);
      s.x += bias[n]; s.y += bias[n + 1]; s.z += bias[n + 2]; s.w += bias[n + 3];
    }
    *c_at = s;
  } else if (rsum && i < mn4 + M) {
    const int m = static_cast<int>(i - mn4);
    rsum[m] += sum_slices(work + static_cast<long long>(splits) * M * N + m, M, splits);
  }
}

// Both launches of one product; the caller has checked the contract (gemm_3xtf32_serves, the workspace).
template <MatrixLayout LA, MatrixLayout LB, Passes P, int kMinBlocks>
cudaError_t launch(int M, int N, int K, const float* A, const float* B, float beta, float* C, const GemmEpilogue& ep, float* work,
                   cudaStream_t s, const GemmHeads& heads) {
  const Plan plan(M, N, K);
  const dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM, plan.splits);
  // Each matrix as stored: A row-major M x K or stored K x M, B likewise.
  constexpr bool a_row = LA == MatrixLayout::RowMajor, b_row = LB == MatrixLayout::RowMajor;
  const HeadIndices hi{HeadIndex(heads.a, a_row ? M : K, a_row ? K : M), HeadIndex(heads.b, b_row ? K : N, b_row ? N : K),
                       HeadIndex(heads.c, M, N)};
  const unsigned which = (hi.a.on ? kHeadsA : 0) | (hi.b.on ? kHeadsB : 0) | (hi.c.on ? kHeadsC : 0);
  const auto go = [&](auto kernel) {
    kernel<<<grid, kThreads, 0, s>>>(A, B, C, work, M, N, K, plan.k_per_split, beta, ep.bias, ep.a_row_sums, hi);
  };
  switch (which) {
    case 0: go(gemm_kernel<LA, LB, P, kMinBlocks, 0>); break;
    case 1: go(gemm_kernel<LA, LB, P, kMinBlocks, 1>); break;
    case 2: go(gemm_kernel<LA, LB, P, kMinBlocks, 2>); break;
    case 3: go(gemm_kernel<LA, LB, P, kMinBlocks, 3>); break;
    case 4: go(gemm_kernel<LA, LB, P, kMinBlocks, 4>); break;
    case 5: go(gemm_kernel<LA, LB, P, kMinBlocks, 5>); break;
    case 6: go(gemm_kernel<LA, LB, P, kMinBlocks, 6>); break;
    default: go(gemm_kernel<LA, LB, P, kMinBlocks, 7>); break;
  }
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess || plan.splits == 1) return e;
  const long long items = static_cast<long long>(M) * N / 4 + (ep.a_row_sums ? M : 0);
  reduce_slices_kernel<<<static_cast<unsigned>((items + 255) / 256), 256, 0, s>>>(work, C, M, N, plan.splits, beta, ep.bias, ep.a_row_sums,
                                                                                  hi.c);
  return cudaGetLastError();
}

template <Passes P, int kMinBlocks = 0>
cudaError_t launch(MatrixLayout la, MatrixLayout lb, int M, int N, int K, const float* A, const float* B, float beta, float* C,
                   const GemmEpilogue& ep, float* work, cudaStream_t s, const GemmHeads& heads) {
  constexpr MatrixLayout R = MatrixLayout::RowMajor, Cm = MatrixLayout::ColMajor;
  if (la == R && lb == R) return launch<R, R, P, kMinBlocks>(M, N, K, A, B, beta, C, ep, work, s, heads);
  if (la == R) return launch<R, Cm, P, kMinBlocks>(M, N, K, A, B, beta, C, ep, work, s, heads);
  if (lb == R) return launch<Cm, R, P, kMinBlocks>(M, N, K, A, B, beta, C, ep, work, s, heads);
  return launch<Cm, Cm, P, kMinBlocks>(M, N, K, A, B, beta, C, ep, work, s, heads);
}

}  // namespace vla::gpu::gemm
