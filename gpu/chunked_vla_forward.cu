// The chunkwise-parallel forward of Algorithm 1 on the GPU. The equations are derived in
// docs/chunkwise-vla.md: (V1)-(V5) within a chunk, (P1)-(P3) for the penalty chain across groups.
// core/rules/vla/chunked.hpp and core/rules/vla/penalty_chain.hpp are the same algebra on the CPU over any
// scalar; the GPU tests hold this forward to the CPU double path (tests/gpu/test_chunked_vla_forward.cpp).
//
// Parallel structure. A sequence is cut into groups of `group` refresh segments (without a refresh,
// `group` chunks); a group into chunks of at most C tokens that end on refresh steps. Only two short
// chains run in sequence order, one step per group; everything else runs for every group at once, one
// warp per (sequence, group) (d = 32; a chunk's matrix products on the tensor cores, its triangular
// factorisation and sweeps with lane = coordinate):
//   1 group_maps      Pi_g = H_m ... H_1 (P2) from the group's u_t alone (H_s Pi on the tensor cores); the
//                     group's key sum
//   2 penalty_chain   per sequence: the homogeneous pair [X; Z] at every group start by products with Pi_g
//                     (P2), renormalised to [A; I] by (P3) (a 32 x 32 solve) once per span of groups; and z
//     penalty_expand  A_g = X_g Z_g^{-1} at the other group starts, every group at once
//   3 alphas          from A_g, the group's chunks in order: W, G = L D L^T, Y, Alpha, A' (V1-V4); writes
//                     alpha_hat_t (line 20) and k_hat_t (line 9) for every token
//   4 memory_maps     the group's memory update as an affine map of the rows of S: S_end = S_g Tr_g + B_g
//                     (V5 is affine in each row of S: run from 0 with the values it leaves B_g, from the unit
//                     rows without values Tr_g; the two matrices side by side)
//   5 memory_chain    per sequence: S at every group start, S_{g+1} = S_g Tr_g + B_g
//   6 outputs         from S_g and z_g, the group's chunks in order: the residual sweep and the read (V5, D3)
// The sequential depth is T / (group tokens) chain steps instead of T / C chunk steps, and the chunk work
// is spread over B H T / (group tokens) warps instead of B H blocks. A launch whose group kernels need more
// than one wave of blocks runs in parts of whole sequences, one wave each, on streams of their own, so that
// one part's chains run beside the next part's group kernels (chunked_vla_parts).
#include "gpu/chunked_vla_forward.hpp"

#include "core/phi.hpp"
#include "gpu/pivot_rcp.cuh"
#include "gpu/tf32_mma.cuh"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>

namespace vla::gpu {
namespace {

constexpr unsigned kFull = 0xffffffffu;
constexpr int D = 32;               // head width: lane = coordinate
constexpr int LD = D + 4;           // row stride of the warps' shared matrices: float4 rows, and lane-per-row
                                    // float4 reads (8 lanes x 4 banks) cover the 32 banks
constexpr int LM = D + 8;           // row stride of matrices read mostly as mma fragments: = 8 mod 32, so that a
                                    // fragment's (row g, column t) or (row t, column g) reads hit 32 banks
constexpr int kWarps = 4;           // warps per block of the group-parallel kernels (each its own group)
constexpr int kBatch = 16;          // group_maps: tokens whose loads are issued together
constexpr int kPenaltyChainThreads = 256;  // penalty_chain: warp w owns rows w, w + 8, ... of the product
constexpr int kExpandWarps = 4;            // penalty_expand: one warp per group
constexpr int kMemoryChainThreads = 256;   // memory_chain: warp w owns rows w, w + 8, ...
constexpr int kCheckpointThreads = 1024;   // checkpoints: thread (r, lane) one entry of S and A

// 1 / ||x|| from ||x||^2; NaN where unit() has no finite answer (an overflowed or zero square), so that the
// error shows in the output instead of a plausible 0 (docs/recurrences.md, "Scale").
__device__ __forceinline__ float inv_norm(float sq) {
  return sq > 0.f && sq <= 3.402823466e38f ? 1.f / sqrtf(sq) : __int_as_float(0x7fc00000);
}

// A compiler barrier for shared-memory reads: unrolled loops would otherwise hoist every row's loads to
// the top (hundreds of registers); one row at a time keeps the warp's state in registers without spills.
__device__ __forceinline__ void row_fence() { asm volatile("" ::: "memory"); }

__device__ __forceinline__ float4 ld4(const float* p) { return *reinterpret_cast<const float4*>(p); }

// a . b of two shared rows on the calling lane (with a = b, ||a||^2: one lane per row gives every row's norm
// at once, instead of a warp-wide butterfly per row).
__device__ __forceinline__ float dot_row_shared(const float* a, const float* b) {
  float acc = 0.f;
#pragma unroll
  for (int k = 0; k < D; k += 4) {
    const float4 x = ld4(a + k), y = ld4(b + k);
    acc = fmaf(x.x, y.x, acc);
    acc = fmaf(x.y, y.y, acc);
    acc = fmaf(x.z, y.z, acc);
    acc = fmaf(x.w, y.w, acc);
  }
  return acc;
}

__device__ __forceinline__ void load_row(float (&x)[D], const float* __restrict__ row) {
#pragma unroll
  for (int k = 0; k < D; k += 4) {
    const float4 r = ld4(row + k);
    x[k] = r.x; x[k + 1] = r.y; x[k + 2] = r.z; x[k + 3] = r.w;
  }
}

// Tensor-core products: gpu/tf32_mma.cuh (Tf32, tf32_split, mma_tf32, mma_3xtf32: the split, the three passes
// and why each k block of 8 is summed from zero).
// What a product reads (core/product_operands.hpp): Full, the split above and the three passes; Tf32, the
// split's head alone (x rounded to nearest at 11 significant bits, as round_to_tf32 emulates on the CPU) and
// one pass accumulated on the tensor core, its truncation far below the operands' 2^-11.
template <ProductOperands Ops> __device__ __forceinline__ Tf32 operand(float x) {
  if constexpr (Ops == ProductOperands::Full) {
    return tf32_split(x);
  } else {
    const float p = __fmul_rn(x, 8193.f);
    return {__float_as_uint(__fsub_rn(p, __fsub_rn(p, x))), 0u};
  }
}
template <ProductOperands Ops> __device__ __forceinline__ void mma_add(float (&c)[4], const Tf32 (&a)[4], const Tf32 (&b)[2]) {
  if constexpr (Ops == ProductOperands::Full) mma_3xtf32(c, a, b);
  else mma_tf32(c, a[0].hi, a[1].hi, a[2].hi, a[3].hi, b[0].hi, b[1].hi);
}

// The A fragment of rows r0 = 16 mi + g and r0 + 8 of a row-major shared matrix (row stride ld) at k block
// ks, k in the permuted order of the products over coordinates: slot t holds coordinate 2t, slot t + 4
// coordinate 2t + 1, so that a row's two are one float2 read. Rows at or past `rows` read as zero.
template <ProductOperands Ops, int ld = LD> __device__ __forceinline__ void rows_fragment(Tf32 (&af)[4], const float* X, int r0, int rows, int ks, int t4) {
  const float2 z = make_float2(0.f, 0.f);
  const float2 x0 = r0 < rows ? *reinterpret_cast<const float2*>(X + r0 * ld + 8 * ks + 2 * t4) : z;
  const float2 x1 = r0 + 8 < rows ? *reinterpret_cast<const float2*>(X + (r0 + 8) * ld + 8 * ks + 2 * t4) : z;
  af[0] = operand<Ops>(x0.x);
  af[1] = operand<Ops>(x1.x);
  af[2] = operand<Ops>(x0.y);
  af[3] = operand<Ops>(x1.y);
}

// P = X Z^T over the 32 coordinates of rows in shared memory (row stride ld): X has XR rows, Z has ZR, rows
// past them read as zero; p[mi][nb] is the accumulator tile of rows 16 mi.., columns 8 nb...
template <ProductOperands Ops, int XR, int ZR, int ld = LD, int MT = (XR + 15) / 16, int NT = (ZR + 7) / 8>
__device__ __forceinline__ void rows_product(float (&p)[MT][NT][4], const float* X, const float* Z, int g4, int t4) {
#pragma unroll
  for (int mi = 0; mi < MT; ++mi)
#pragma unroll
    for (int nb = 0; nb < NT; ++nb)
#pragma unroll
      for (int r = 0; r < 4; ++r) p[mi][nb][r] = 0.f;
#pragma unroll
  for (int ks = 0; ks < D / 8; ++ks) {
    Tf32 b[NT][2];  // B(k, n) = Z(n, k): row 8 nb + g of Z, the same two coordinates as the A fragment
#pragma unroll
    for (int nb = 0; nb < NT; ++nb) {
      const int zr = 8 * nb + g4;
      const float2 z = zr < ZR ? *reinterpret_cast<const float2*>(Z + zr * ld + 8 * ks + 2 * t4) : make_float2(0.f, 0.f);
      b[nb][0] = operand<Ops>(z.x);
      b[nb][1] = operand<Ops>(z.y);
    }
#pragma unroll
    for (int mi = 0; mi < MT; ++mi) {
      Tf32 af[4];
      rows_fragment<Ops, ld>(af, X, 16 * mi + g4, XR, ks, t4);
#pragma unroll
      for (int nb = 0; nb < NT; ++nb) mma_add<Ops>(p[mi][nb], af, b[nb]);
    }
  }
}

// A CM x CM product's tiles into a shared matrix of row stride CM + 1: entry (i, j) where j <= i - strict
// (strict = 1: below the diagonal, 0: with it, -CM: every entry), times scale[j] where a scale is given;
// zero elsewhere.
template <int CM, int MT, int NT>
__device__ __forceinline__ void store_square(const float (&p)[MT][NT][4], float* M, int strict, int g4, int t4, const float* scale = nullptr) {
#pragma unroll
  for (int mi = 0; mi < MT; ++mi)
#pragma unroll
    for (int nb = 0; nb < NT; ++nb)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int i = 16 * mi + g4 + 8 * (r >> 1), j = 8 * nb + 2 * t4 + (r & 1);
        if (i < CM && j < CM) M[i * (CM + 1) + j] = j <= i - strict ? (scale ? p[mi][nb][r] * scale[j] : p[mi][nb][r]) : 0.f;
      }
}

// -a for an operand split: both parts' signs flipped (exact).
__device__ __forceinline__ void negate(Tf32 (&af)[4]) {
#pragma unroll
  for (int r = 0; r < 4; ++r) af[r] = {af[r].hi ^ 0x80000000u, af[r].lo ^ 0x80000000u};
}

// The fragments of the products summed over a chunk's rows (k = the row t, in its natural order; k padded
// to a multiple of 8 with zero rows: rows at or past `rows` read as zero). B: rows 8 ks + t and + 4 of a
// row-major shared matrix M (row stride ld) at column n, each times scale[row] where a scale is given.
template <ProductOperands Ops, int ld>
__device__ __forceinline__ void chunk_b_fragment(Tf32 (&b)[2], const float* M, int rows, int ks, int n, int t4, const float* scale = nullptr) {
  const int k0 = 8 * ks + t4, k1 = k0 + 4;
  b[0] = operand<Ops>(k0 < rows ? (scale ? scale[k0] : 1.f) * M[k0 * ld + n] : 0.f);
  b[1] = operand<Ops>(k1 < rows ? (scale ? scale[k1] : 1.f) * M[k1 * ld + n] : 0.f);
}
// A from M^T: rows m0 = 16 mi + g and m0 + 8 of M^T are columns of M.
template <ProductOperands Ops, int ld> __device__ __forceinline__ void chunk_at_fragment(Tf32 (&af)[4], const float* M, int rows, int ks, int m0, int t4) {
  const int k0 = 8 * ks + t4, k1 = k0 + 4;
  af[0] = operand<Ops>(k0 < rows ? M[k0 * ld + m0] : 0.f);
  af[1] = operand<Ops>(k0 < rows ? M[k0 * ld + m0 + 8] : 0.f);
  af[2] = operand<Ops>(k1 < rows ? M[k1 * ld + m0] : 0.f);
  af[3] = operand<Ops>(k1 < rows ? M[k1 * ld + m0 + 8] : 0.f);
}
// A from a CM x CM matrix (stride CM + 1): rows m0 and m0 + 8, entries past CM zero.
template <ProductOperands Ops, int CM> __device__ __forceinline__ void chunk_square_fragment(Tf32 (&af)[4], const float* M, int ks, int m0, int t4) {
  const int k0 = 8 * ks + t4, k1 = k0 + 4, m1 = m0 + 8;
  af[0] = operand<Ops>(m0 < CM && k0 < CM ? M[m0 * (CM + 1) + k0] : 0.f);
  af[1] = operand<Ops>(m1 < CM && k0 < CM ? M[m1 * (CM + 1) + k0] : 0.f);
  af[2] = operand<Ops>(m0 < CM && k1 < CM ? M[m0 * (CM + 1) + k1] : 0.f);
  af[3] = operand<Ops>(m1 < CM && k1 < CM ? M[m1 * (CM + 1) + k1] : 0.f);
}

// One accumulator tile's rows m0 = 16 mi + g and m0 + 8, columns n0 = 8 nb + 2t and n0 + 1, from or into a
// row-major matrix (shared or global, row stride ld); rows at or past `rows` read as zero and are not written.
__device__ __forceinline__ void load_tile(float (&c)[4], const float* M, int ld, int rows, int m0, int n0) {
  const float2 z = make_float2(0.f, 0.f);
  const float2 e0 = m0 < rows ? *reinterpret_cast<const float2*>(M + m0 * ld + n0) : z;
  const float2 e1 = m0 + 8 < rows ? *reinterpret_cast<const float2*>(M + (m0 + 8) * ld + n0) : z;
  c[0] = e0.x; c[1] = e0.y; c[2] = e1.x; c[3] = e1.y;
}
__device__ __forceinline__ void store_tile(const float (&c)[4], float* M, int ld, int rows, int m0, int n0) {
  if (m0 < rows) *reinterpret_cast<float2*>(M + m0 * ld + n0) = make_float2(c[0], c[1]);
  if (m0 + 8 < rows) *reinterpret_cast<float2*>(M + (m0 + 8) * ld + n0) = make_float2(c[2], c[3]);
}

// ---------------------------------------------------------------------------------------------------------
// Geometry shared by host and device.

struct Plan {
  int T, C, period;
  int group_tokens;  // a multiple of the period (refresh on) or of C (off): chunks never cross a group
  int groups;        // per sequence
  int seqs;          // B H
  int span;          // the penalty chain renormalises at groups 0, span, 2 span, ...
  float lambda0, eta, eps;
  // Workspace, floats: per (sequence, group) slots, then alpha_hat and k_hat for every token.
  float* pi;      // (seqs, groups, 2D, 2D)  Pi_g
  float* zsum;    // (seqs, groups, D)       the group's sum of phi(k_t)
  float* a0;      // (seqs, groups, D, D)    A before the group (X before penalty_expand, where it solves)
  float* zh;      // (seqs, groups, D, D)    Z before the group, where penalty_expand solves
  float* z0;      // (seqs, groups, D)       z before the group
  float* tr;      // (seqs, groups, D, D)    Tr_g
  float* bm;      // (seqs, groups, D, D)    B_g
  float* s0;      // (seqs, groups, D, D)    S before the group
  float* ahat;    // (seqs, T, D)            alpha_hat_t
  float* khat;    // (seqs, T, D)            k_hat_t (line 9), written by alphas for the memory maps
  float* checkpoints;  // x.checkpoints or null: the backward's checkpoint of every group start
  float* chunk_starts; // or null: (S, A, z) before every chunk (chunked_vla_forward's chunk_starts)
  int chunks;          // per sequence
  __device__ float* chunk_start_slot(int seq, int c0) const {
    return chunk_starts + (static_cast<long long>(seq) * chunks + chunk_of(c0, C, period)) * backward_slot_floats(D);
  }
  __host__ __device__ long long slot(int seq, int g) const { return static_cast<long long>(seq) * groups + g; }
};

// The group-parallel kernels: block b, warp w -> (sequence, group), one warp per group; false for a warp
// past the last group.
__host__ __device__ constexpr long long group_blocks(long long groups) { return (groups + kWarps - 1) / kWarps; }
__host__ __device__ inline int blocks_per_sequence(const Plan& pl) { return static_cast<int>(group_blocks(pl.groups)); }
__device__ __forceinline__ bool my_group(const Plan& pl, int& seq, int& g) {
  const int per_seq = blocks_per_sequence(pl);
  seq = blockIdx.x / per_seq;
  g = (blockIdx.x % per_seq) * kWarps + static_cast<int>(threadIdx.x >> 5);
  return g < pl.groups;
}

// ---------------------------------------------------------------------------------------------------------
// 1. group_maps: Pi_g = H_m ... H_1 with H_s = [[I + eta_s Gram_s, eta_s I], [Gram_s, I]] (P2).

constexpr int LP = 2 * D + 8;  // Pi's row stride: = 8 mod 32, so that a B fragment's (row t, column g) hit 32 banks
struct alignas(16) MapSmem {
  float pi[2 * D][LP];         // Pi (lane j sets and writes out columns j and j + D; H_s Pi updates it by tiles)
  float gram[D][LD];           // the segment's Gram, rows broadcast
  float u[kBatch][LD];         // a batch of u_t rows
  float inv[kBatch];           // their 1 / ||u_t||
};
static_assert(kBatch <= 32, "group_maps: one lane per row of a batch");

__global__ void __launch_bounds__(kWarps * 32) group_maps_kernel(RecurrentTensors x, Plan pl) {
  extern __shared__ __align__(16) unsigned char smem[];
  int seq, g;
  if (!my_group(pl, seq, g)) return;
  const int lane = threadIdx.x & 31;
  MapSmem& s = reinterpret_cast<MapSmem*>(smem)[threadIdx.x >> 5];
  for (int i = 0; i < 2 * D; ++i) {
    s.pi[i][lane] = i == lane ? 1.f : 0.f;
    s.pi[i][lane + D] = i == lane + D ? 1.f : 0.f;
  }
  const long long base = static_cast<long long>(seq) * pl.T * D;
  const float u_scale = 1.f / sqrtf(static_cast<float>(D));
  const int t0 = g * pl.group_tokens, t1 = min(pl.T, t0 + pl.group_tokens);
  const int seg = pl.period > 0 ? pl.period : pl.group_tokens;  // without a refresh: one segment, H = [[I, 0], [Gram, I]]
  float zs = 0.f;
  for (int s0 = t0; s0 < t1; s0 += seg) {
    const int s1 = min(t1, s0 + seg);
    float gram[D];  // column `lane` of the segment's Gram
#pragma unroll
    for (int i = 0; i < D; ++i) gram[i] = 0.f;
    for (int t0b = s0; t0b < s1; t0b += kBatch) {
      // The batch's loads first, so that their latencies overlap (the sums below would serialise them).
      float ub[kBatch], kb[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const long long at = base + static_cast<long long>(t0b + b < s1 ? t0b + b : s0) * D + lane;
        ub[b] = x.u[at];
        kb[b] = x.k[at];
      }
      // Line 10's norms one row per lane (a lane-local dot product instead of a butterfly per row).
#pragma unroll
      for (int b = 0; b < kBatch; ++b) s.u[b][lane] = ub[b];
      __syncwarp();
      if (lane < kBatch) s.inv[lane] = inv_norm(dot_row_shared(s.u[lane], s.u[lane]));
      __syncwarp();
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const bool in = t0b + b < s1;  // warp-uniform
        const float u = in ? ub[b] * s.inv[b] * u_scale : 0.f;  // line 10
        if (in) zs += elu_plus_one(kb[b]);
        s.u[b][lane] = u;
        ub[b] = u;
      }
      __syncwarp();
      // Gram column `lane` += u_t u_t[lane]: the rows broadcast from shared memory.
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        float row[D];
        load_row(row, s.u[b]);
#pragma unroll
        for (int i = 0; i < D; ++i) gram[i] = fmaf(row[i], ub[b], gram[i]);
      }
      __syncwarp();
    }
    const float eta = pl.period > 0 && s1 % pl.period == 0 ? pl.eta : 0.f;
#pragma unroll
    for (int i = 0; i < D; ++i) s.gram[i][lane] = gram[i];
    __syncwarp();
    // H_s Pi: bottom' = Gram top + bottom, top' = top + eta_s bottom'. Gram top (32 x 64) on the tensor cores
    // in 3xTF32 (fp32 accuracy, as the chunk products), 2 x 8 tiles of 16 x 8 per warp, all of them read
    // before any entry of Pi is written.
    const int g4 = lane >> 2, t4 = lane & 3;
    float c[2][8][4];
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int ni = 0; ni < 8; ++ni)
#pragma unroll
        for (int r = 0; r < 4; ++r) c[mi][ni][r] = 0.f;
#pragma unroll
    for (int ks = 0; ks < D / 8; ++ks) {
      const int k0 = 8 * ks + t4;
      Tf32 af[2][4];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        const int m0 = 16 * mi + g4;
        af[mi][0] = tf32_split(s.gram[m0][k0]);
        af[mi][1] = tf32_split(s.gram[m0 + 8][k0]);
        af[mi][2] = tf32_split(s.gram[m0][k0 + 4]);
        af[mi][3] = tf32_split(s.gram[m0 + 8][k0 + 4]);
      }
#pragma unroll
      for (int ni = 0; ni < 8; ++ni) {
        const Tf32 bf[2] = {tf32_split(s.pi[k0][8 * ni + g4]), tf32_split(s.pi[k0 + 4][8 * ni + g4])};
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) mma_3xtf32(c[mi][ni], af[mi], bf);
      }
    }
    __syncwarp();
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int ni = 0; ni < 8; ++ni)
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // rows 16 mi + g4 (+ 8), columns 8 ni + 2 t4 and the next
          const int i = 16 * mi + g4 + 8 * h, n = 8 * ni + 2 * t4;
          float2 bottom = *reinterpret_cast<float2*>(&s.pi[D + i][n]);
          float2 top = *reinterpret_cast<float2*>(&s.pi[i][n]);
          bottom.x += c[mi][ni][2 * h];
          bottom.y += c[mi][ni][2 * h + 1];
          top.x = fmaf(eta, bottom.x, top.x);
          top.y = fmaf(eta, bottom.y, top.y);
          *reinterpret_cast<float2*>(&s.pi[D + i][n]) = bottom;
          *reinterpret_cast<float2*>(&s.pi[i][n]) = top;
        }
    __syncwarp();
  }
  float* out = pl.pi + pl.slot(seq, g) * (4 * D * D);
  for (int i = 0; i < 2 * D; ++i) {
    out[i * 2 * D + lane] = s.pi[i][lane];
    out[i * 2 * D + lane + D] = s.pi[i][lane + D];
  }
  pl.zsum[pl.slot(seq, g) * D + lane] = zs;
}

// ---------------------------------------------------------------------------------------------------------
// 2. penalty_chain and penalty_expand: A at every group start from the homogeneous pair [X; Z] (P2, P3).
// The chain carries [X; Z] across groups with one product per group, [X; Z] <- Pi_g [X; Z] (a product of
// Moebius maps is the product of their matrices), and renormalises it to [A; I] by a solve only at the first
// group of every span of `span` groups: in between, A_g = X_g Z_g^{-1} is what a longer group's (P3) would
// give, and penalty_expand solves those for every group at once. So the chain's steps are products (a few
// microseconds) and its solves one per span (the products within a span are as accurate as one group of
// that many segments: docs/chunkwise-vla.md, "The penalty chain"). z_{g+1} = z_g + zsum_g on the way.
//
// The solve: Gauss-Jordan with partial pivoting of Z^T A = X^T on [Z^T | X^T], lane r holding row r (the
// steps unrolled, so that every column index is a compile-time register index). Step k picks the pivot row p
// of column k among the rows not yet used; every other row subtracts f_r = m_r[k] / m_p[k] times row p, whose
// entries it reads by shuffles. Only the columns after k are updated: column k has chosen its pivot and the
// earlier ones are eliminated, and neither is read again. Row k of A = X Z^{-1} is then the X^T part of the
// row chosen at step k over its pivot (A symmetric). The pivots and multipliers come from the Z^T part alone,
// so one warp eliminates Z^T and records them (eliminate_pivots), and the X^T columns replay the record
// (apply_pivots), split over as many warps as the caller has: no barrier within either part, where a block
// spread over the rows paid one per step (docs/chunkwise-vla-gpu.md, "GPU forward").
struct PivotRecord {
  float f[D][D];     // f[k][r]: row r's multiplier at step k (0 for the pivot row)
  int pivot[D];      // the row chosen at step k
  int step_of[D];    // the step that chose row r
  float inv[D];      // 1 / row r's pivot
};

// The pivot of column k from its entries v (lane = row) among the rows not yet used (`used`, updated). The
// largest |v| in one warp reduction: the key is |v|'s bit pattern (ordered as an unsigned for v >= 0) with its
// 5 low bits replaced by 31 - row, so ties (and values within 2^-18 relative) go to the first row. A NaN or
// used row has key 0 and never wins; with no usable candidate the first unused row is taken (the NaN then
// spreads).
__device__ __forceinline__ int choose_pivot(float v, unsigned& used, int lane) {
  const float a = fabsf(v);
  const unsigned key = (used >> lane & 1u) || !(a > 0.f) ? 0u : (__float_as_uint(a) & ~31u) | (31u - lane);
  const unsigned top = __reduce_max_sync(kFull, key);
  const int p = top != 0u ? 31 - static_cast<int>(top & 31u) : __ffs(~used) - 1;
  used |= 1u << p;
  return p;
}

// Every lane of one warp, z holding row `lane` of Z^T: its elimination, recorded in rec.
__device__ __forceinline__ void eliminate_pivots(float (&z)[D], PivotRecord& rec) {
  const int lane = threadIdx.x & 31;
  unsigned used = 0u;
#pragma unroll
  for (int k = 0; k < D; ++k) {
    const int p = choose_pivot(z[k], used, lane);
    const float inv = pivot_rcp(__shfl_sync(kFull, z[k], p));
    const float f = lane == p ? 0.f : z[k] * inv;
    rec.f[k][lane] = f;
    if (lane == p) rec.pivot[k] = p, rec.step_of[p] = k, rec.inv[p] = inv;
#pragma unroll
    for (int j = k + 1; j < D; ++j) z[j] = fmaf(-f, __shfl_sync(kFull, z[j], p), z[j]);
  }
  __syncwarp();
}

// Every lane of a warp, x holding columns c0 .. c0 + NC - 1 of row `lane` of X^T: the recorded elimination
// applied to them, and those columns of A written into a (row stride D + 1), whose entry (r, j) the callers
// read symmetrised, as the recurrence keeps A, by sym_entry.
template <int NC> __device__ __forceinline__ void apply_pivots(float (&x)[NC], const PivotRecord& rec, float (*a)[D + 1], int c0) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int k = 0; k < D; ++k) {
    const int p = rec.pivot[k];
    const float f = rec.f[k][lane];
#pragma unroll
    for (int c = 0; c < NC; ++c) x[c] = fmaf(-f, __shfl_sync(kFull, x[c], p), x[c]);
  }
  const int step = rec.step_of[lane];
  const float inv = rec.inv[lane];
#pragma unroll
  for (int c = 0; c < NC; ++c) a[step][c0 + c] = x[c] * inv;
}

__device__ __forceinline__ float sym_entry(const float (*a)[D + 1], int r, int j) { return 0.5f * (a[r][j] + a[j][r]); }

struct alignas(16) ChainSmem {
  float pi[2 * D][2 * D + 4];  // float4 rows: the product reads four of a row's entries at once
  float xz[2 * D][D + 1];      // [X; Z] before the current group: A = X Z^{-1}
  float a[D][D + 1];           // A from the solve
  PivotRecord rec;             // the solve's pivots
};

// Warp w owns rows w, w + W, ... of X and of Z (W warps), lane = column; warp 0 also solves and carries z.
__global__ void __launch_bounds__(kPenaltyChainThreads) penalty_chain_kernel(Plan pl) {
  constexpr int W = kPenaltyChainThreads / 32, kRows = D / W;
  static_assert(D % W == 0, "penalty_chain: every warp owns the same number of rows");
  __shared__ ChainSmem s;
  const int seq = blockIdx.x, w = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    const int r = w + i * W;
    s.xz[r][lane] = r == lane ? 1.f / pl.lambda0 : 0.f;  // line 4: [A_0; I]
    s.xz[D + r][lane] = r == lane ? 1.f : 0.f;
  }
  float z = 0.f;  // warp 0: z, lane = coordinate
  // Pi_g's entries of this thread and (warp 0) the group's key sum, loaded a group ahead so that the global
  // loads' latency overlaps a step.
  constexpr int kPer = 4 * D * D / kPenaltyChainThreads;
  float next_pi[kPer], next_zsum = 0.f;
  const auto load_group = [&](int g) {
    const float* pi = pl.pi + pl.slot(seq, g) * (4 * D * D);
#pragma unroll
    for (int i = 0; i < kPer; ++i) next_pi[i] = pi[threadIdx.x + i * kPenaltyChainThreads];
    if (w == 0) next_zsum = pl.zsum[pl.slot(seq, g) * D + lane];
  };
  load_group(0);
  for (int g = 0; g < pl.groups; ++g) {
    const long long at = pl.slot(seq, g) * D * D + lane;  // + r D: entry (r, lane) of the group's slot
    __syncthreads();  // the previous step's reads of pi done, its [X; Z] written
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int e = threadIdx.x + i * kPenaltyChainThreads;
      s.pi[e / (2 * D)][e % (2 * D)] = next_pi[i];
    }
    const float zsum = next_zsum;
    if (g + 1 < pl.groups) load_group(g + 1);
    if (g % pl.span == 0) {
      if (g > 0) {  // renormalise: [X; Z] -> [A; I]
        if (w == 0) {
          float zt[D];  // row `lane` of Z^T
#pragma unroll
          for (int j = 0; j < D; ++j) zt[j] = s.xz[D + j][lane];
          eliminate_pivots(zt, s.rec);
        }
        __syncthreads();
        {
          constexpr int NC = D / W;
          float xt[NC];  // columns w NC .. of row `lane` of X^T
#pragma unroll
          for (int c = 0; c < NC; ++c) xt[c] = s.xz[w * NC + c][lane];
          apply_pivots(xt, s.rec, s.a, w * NC);
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < kRows; ++i) {
          const int r = w + i * W;
          s.xz[r][lane] = sym_entry(s.a, r, lane);
          s.xz[D + r][lane] = r == lane ? 1.f : 0.f;
        }
      }
    } else {  // penalty_expand solves this group's A from its pair: a0 gets X, zh Z
#pragma unroll
      for (int i = 0; i < kRows; ++i) pl.zh[at + (w + i * W) * D] = s.xz[D + w + i * W][lane];
    }
#pragma unroll
    for (int i = 0; i < kRows; ++i) pl.a0[at + (w + i * W) * D] = s.xz[w + i * W][lane];
    if (w == 0) {
      pl.z0[pl.slot(seq, g) * D + lane] = z;
      z += zsum;
    }
    if (g + 1 == pl.groups) break;
    __syncthreads();  // pi stored, [X; Z] final
    // [X; Z] <- Pi_g [X; Z]: rows w + i W of X' and Z', column lane.
    float xn[kRows] = {}, zn[kRows] = {};
#pragma unroll 4
    for (int k = 0; k < 2 * D; k += 4) {
      const float c0 = s.xz[k][lane], c1 = s.xz[k + 1][lane], c2 = s.xz[k + 2][lane], c3 = s.xz[k + 3][lane];
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        const float4 px = ld4(&s.pi[w + i * W][k]), pz = ld4(&s.pi[D + w + i * W][k]);
        xn[i] = fmaf(px.x, c0, xn[i]); xn[i] = fmaf(px.y, c1, xn[i]); xn[i] = fmaf(px.z, c2, xn[i]); xn[i] = fmaf(px.w, c3, xn[i]);
        zn[i] = fmaf(pz.x, c0, zn[i]); zn[i] = fmaf(pz.y, c1, zn[i]); zn[i] = fmaf(pz.z, c2, zn[i]); zn[i] = fmaf(pz.w, c3, zn[i]);
      }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      s.xz[w + i * W][lane] = xn[i];
      s.xz[D + w + i * W][lane] = zn[i];
    }
  }
}

// A_g = X_g Z_g^{-1} for the groups the chain did not renormalise at, one warp each (kExpandWarps groups a
// block), every group at once.
__global__ void __launch_bounds__(kExpandWarps * 32) penalty_expand_kernel(Plan pl) {
  __shared__ float a[kExpandWarps][D][D + 1];
  __shared__ PivotRecord rec[kExpandWarps];
  const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const long long slot = static_cast<long long>(blockIdx.x) * kExpandWarps + w;  // = pl.slot(seq, g)
  if (slot >= static_cast<long long>(pl.seqs) * pl.groups || (slot % pl.groups) % pl.span == 0) return;  // warp-uniform
  const long long at = slot * D * D + lane;
  float m[D];  // row `lane` of Z^T, then of X^T
#pragma unroll
  for (int j = 0; j < D; ++j) m[j] = pl.zh[at + j * D];
  eliminate_pivots(m, rec[w]);
#pragma unroll
  for (int j = 0; j < D; ++j) m[j] = pl.a0[at + j * D];
  apply_pivots(m, rec[w], a[w], 0);
  __syncwarp();
#pragma unroll
  for (int r = 0; r < D; ++r) pl.a0[at + r * D] = sym_entry(a[w], r, lane);
}

// ---------------------------------------------------------------------------------------------------------
// 3. alphas: from A_g, the group's chunks in order (V1)-(V4); A in registers as a tensor-core accumulator.

template <int CM> struct alignas(16) AlphaSmem {
  float U[CM][LD];    // u_t                     (line 10)
  float K[CM][LD];    // k_hat_t                 (line 9)
  float W[CM][LD];    // U A_c, then Y = L^-1 W  (V1, V2)
  float KA[CM][LD];   // K A_c                   (V3); follows W, as K follows U: one product makes both
  float col[2][32];   // the L D L^T's current column, by pivot parity (lanes past CM write zeros)
  float L[CM][CM + 1];
  float KYD[CM][CM + 1];  // tril(K Y^T) D^-1    (V3)
  float Dinv[CM];
  float inv_k[CM], inv_u[CM];  // 1 / ||phi(k_t)||, 1 / ||u_raw_t||, then 1 / ||alpha_t||
};

template <int CM, ProductOperands Ops> __global__ void __launch_bounds__(kWarps * 32) alphas_kernel(RecurrentTensors x, Plan pl) {
  extern __shared__ __align__(16) unsigned char smem[];
  int seq, g;
  if (!my_group(pl, seq, g)) return;
  const int lane = threadIdx.x & 31, g4 = lane >> 2, t4 = lane & 3;
  AlphaSmem<CM>& s = reinterpret_cast<AlphaSmem<CM>*>(smem)[threadIdx.x >> 5];
  const long long base = static_cast<long long>(seq) * pl.T * D;
  const float u_scale = 1.f / sqrtf(static_cast<float>(D));
  // A as the accumulator of a 32 x 32 product: a[mi][ni][r] = A(16 mi + g4 + 8 (r / 2), 8 ni + 2 t4 + r % 2).
  float a[2][4][4];
  const float* a0 = pl.a0 + pl.slot(seq, g) * D * D;
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) load_tile(a[mi][ni], a0, D, D, 16 * mi + g4, 8 * ni + 2 * t4);
  const int t1 = min(pl.T, (g + 1) * pl.group_tokens);
  for (int c0 = g * pl.group_tokens; c0 < t1;) {
    const int n = chunk_length(c0, pl.T, pl.C, pl.period);
    const float shift = pl.period > 0 && (c0 + n) % pl.period == 0 ? pl.eta : 0.f;
    if (pl.chunk_starts) {  // A before the chunk, for the chunk-form backward
      float* a_out = pl.chunk_start_slot(seq, c0) + D * D;
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) store_tile(a[mi][ni], a_out, D, D, 16 * mi + g4, 8 * ni + 2 * t4);
    }
    // Lines 8-10 for the chunk's rows; rows n.. are zero, so every loop below runs over all CM rows.
    float kraw[CM], uraw[CM];  // every row's loads first, so that their latencies overlap
#pragma unroll
    for (int r = 0; r < CM; ++r) {
      const long long at = base + static_cast<long long>(c0 + (r < n ? r : 0)) * D + lane;
      kraw[r] = x.k[at];
      uraw[r] = x.u[at];
    }
    // A scheduling barrier: without it ptxas moves each row's loads down to their first use (phi's select below
    // gives it one basic block to do so in), and the rows' memory latencies add up instead of overlapping.
    __syncwarp();
#pragma unroll
    for (int r = 0; r < CM; ++r) {
      s.K[r][lane] = r < n ? elu_plus_one(kraw[r]) : 0.f;
      s.U[r][lane] = r < n ? uraw[r] : 0.f;
    }
    __syncwarp();
    if (lane < CM) {  // lane r: the norms of row r
      s.inv_k[lane] = inv_norm(dot_row_shared(s.K[lane], s.K[lane]));
      s.inv_u[lane] = inv_norm(dot_row_shared(s.U[lane], s.U[lane]));
    }
    __syncwarp();
#pragma unroll
    for (int r = 0; r < CM; ++r) {
      s.K[r][lane] = r < n ? s.K[r][lane] * s.inv_k[r] : 0.f;            // line 9
      s.U[r][lane] = r < n ? s.U[r][lane] * s.inv_u[r] * u_scale : 0.f;  // line 10
      if (r < n) pl.khat[base + static_cast<long long>(c0 + r) * D + lane] = s.K[r][lane];
    }
    __syncwarp();
    // (V1, V3): [W; K A_c] = [U; K] A_c, one product on the tensor cores (rows of U, then of K: 2 CM rows in
    // 16-row tiles). The k index runs through each 8-block in the order 0, 4, 1, 5, ... (slot t holds
    // coordinate 2t, slot t + 4 coordinate 2t + 1), so that a row's two coordinates are adjacent (one float2
    // read) and the B fragment, A_c(2t + {0, 1}, 8 nb + g) = A_c(8 nb + g, 2t + {0, 1}) by symmetry, is two
    // of the lane's own accumulator entries.
    {
      constexpr int kTiles = (2 * CM + 15) / 16;
      Tf32 b[4][4][2];  // [k block][n tile][b0, b1]
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)
#pragma unroll
        for (int nb = 0; nb < 4; ++nb)
#pragma unroll
          for (int j = 0; j < 2; ++j) b[ks][nb][j] = operand<Ops>(a[nb >> 1][ks][2 * (nb & 1) + j]);
      const float* in = &s.U[0][0];  // 2 CM rows: U, then K
      float* out = &s.W[0][0];       // 2 CM rows: W, then K A_c
#pragma unroll
      for (int mi = 0; mi < kTiles; ++mi) {
        const int r0 = 16 * mi + g4;
        float c[4][4] = {};
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
          Tf32 af[4];
          rows_fragment<Ops>(af, in, r0, 2 * CM, ks, t4);
#pragma unroll
          for (int nb = 0; nb < 4; ++nb) mma_add<Ops>(c[nb], af, b[ks][nb]);
        }
#pragma unroll
        for (int nb = 0; nb < 4; ++nb) store_tile(c[nb], out, LD, 2 * CM, r0, 8 * nb + 2 * t4);
      }
    }
    __syncwarp();
    float w[CM];  // lane = coordinate: column `lane` of W
#pragma unroll
    for (int r = 0; r < CM; ++r) w[r] = s.W[r][lane];
    // (V1): G = I + U W^T (U W^T on the tensor cores, into L's rows), lane i holding row i, then the unpivoted
    // L D L^T (right-looking: after pivot j every row i > j subtracts L_ij L_kj D_j from its entries k in
    // (j, i]); D_t are Alg. 1's delta_t, clamped as produced (line 13).
    {
      float p[(CM + 15) / 16][(CM + 7) / 8][4];
      rows_product<Ops, CM, CM>(p, &s.U[0][0], &s.W[0][0], g4, t4);
      store_square<CM>(p, &s.L[0][0], -CM, g4, t4);
    }
    __syncwarp();
    {
      float gr[CM];
#pragma unroll
      for (int j = 0; j < CM; ++j) gr[j] = lane < CM && j <= lane ? s.L[lane][j] + (j == lane ? 1.f : 0.f) : 0.f;
      // Column j goes through shared memory once per pivot (one store, a few broadcast float4 reads) instead
      // of one shuffle per entry below the pivot.
      float inv_own = 0.f;
#pragma unroll
      for (int j = 0; j < CM; ++j) {
        float* col = s.col[j & 1];  // two buffers: a lane still reading pivot j - 1's is never overwritten
        col[lane] = gr[j];
        __syncwarp();
        float cv[CM];
#pragma unroll
        for (int k4 = (j / 4) * 4; k4 < CM; k4 += 4) {
          const float4 c = ld4(col + k4);
          cv[k4] = c.x; cv[k4 + 1] = c.y; cv[k4 + 2] = c.z; cv[k4 + 3] = c.w;
        }
        float djj = cv[j];
        djj = djj >= pl.eps ? djj : pl.eps;  // line 13's clamp (NaN -> eps; a NaN input still spreads through W)
        const float inv = pivot_rcp(djj);
        const float lij = lane > j ? gr[j] * inv : 0.f;
#pragma unroll
        for (int k = j + 1; k < CM; ++k)
          if (k <= lane) gr[k] = fmaf(-lij, cv[k], gr[k]);
        gr[j] = lij;
        if (lane == j) inv_own = inv;
      }
      if (lane < CM) {
#pragma unroll
        for (int j = 0; j < CM; ++j) s.L[lane][j] = gr[j];
        s.Dinv[lane] = inv_own;
      }
    }
    __syncwarp();
    // (V2): Y = L^-1 W, lane = column; rows y_t = A_{t-1} u_t.
#pragma unroll
    for (int j = 0; j < CM; ++j)
#pragma unroll
      for (int i = j + 1; i < CM; ++i) w[i] = fmaf(-s.L[i][j], w[j], w[i]);
#pragma unroll
    for (int r = 0; r < CM; ++r) s.W[r][lane] = w[r];
    __syncwarp();
    // (V3): KYD = tril(K Y^T) D^-1 (K Y^T on the tensor cores), then Alpha = K A_c - KYD Y, from the tiles of
    // K A_c, into U's rows (U is spent).
    {
      float p[(CM + 15) / 16][(CM + 7) / 8][4];
      rows_product<Ops, CM, CM>(p, &s.K[0][0], &s.W[0][0], g4, t4);
      store_square<CM>(p, &s.KYD[0][0], 0, g4, t4, s.Dinv);
    }
    __syncwarp();
    {
      // A operand -KYD (row t, k = j), B operand Y (row j), both in their natural order; k padded with zeros.
      constexpr int MT = (CM + 15) / 16, KS = (CM + 7) / 8;
      Tf32 yf[KS][4][2];  // the B fragments of Y, every tile's
#pragma unroll
      for (int ks = 0; ks < KS; ++ks)
#pragma unroll
        for (int nb = 0; nb < 4; ++nb) chunk_b_fragment<Ops, LD>(yf[ks][nb], &s.W[0][0], CM, ks, 8 * nb + g4, t4);
#pragma unroll
      for (int mi = 0; mi < MT; ++mi) {
        float c[4][4];
#pragma unroll
        for (int nb = 0; nb < 4; ++nb) load_tile(c[nb], &s.KA[0][0], LD, CM, 16 * mi + g4, 8 * nb + 2 * t4);
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) {
          Tf32 af[4];
          chunk_square_fragment<Ops, CM>(af, &s.KYD[0][0], ks, 16 * mi + g4, t4);
          negate(af);
#pragma unroll
          for (int nb = 0; nb < 4; ++nb) mma_add<Ops>(c[nb], af, yf[ks][nb]);
        }
#pragma unroll
        for (int nb = 0; nb < 4; ++nb) store_tile(c[nb], &s.U[0][0], LD, CM, 16 * mi + g4, 8 * nb + 2 * t4);
      }
    }
    __syncwarp();
    s.U[n - 1][lane] = fmaf(shift, s.K[n - 1][lane], s.U[n - 1][lane]);  // the chunk's last token reads A after its refresh
    __syncwarp();
    if (lane < CM) s.inv_u[lane] = inv_norm(dot_row_shared(s.U[lane], s.U[lane]));
    __syncwarp();
#pragma unroll
    for (int t = 0; t < CM; ++t)
      if (t < n) pl.ahat[base + static_cast<long long>(c0 + t) * D + lane] = s.U[t][lane] * s.inv_u[t];  // line 20
    // (V4): A' = A_c - Y^T D^-1 Y (+ eta I) on the tensor cores, into A's accumulator: the A operand -Y^T
    // (row i, k = the chunk's row r), the B operand D^-1 Y, k padded to a multiple of 8 with zero rows. The
    // product is not symmetric bit for bit; the next chunk reads A(i, j) for A(j, i) (above), a difference
    // of the products' rounding.
#pragma unroll
    for (int ks = 0; ks < (CM + 7) / 8; ++ks) {
      Tf32 bf[4][2];
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) chunk_b_fragment<Ops, LD>(bf[ni], &s.W[0][0], CM, ks, 8 * ni + g4, t4, s.Dinv);
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        Tf32 af[4];
        chunk_at_fragment<Ops, LD>(af, &s.W[0][0], CM, ks, 16 * mi + g4, t4);
        negate(af);
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) mma_add<Ops>(a[mi][ni], af, bf[ni]);
      }
    }
    if (shift != 0.f) {
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni)
#pragma unroll
          for (int r = 0; r < 4; ++r)
            if (16 * mi + g4 + 8 * (r >> 1) == 8 * ni + 2 * t4 + (r & 1)) a[mi][ni][r] += shift;
    }
    __syncwarp();
    c0 += n;
  }
}

// ---------------------------------------------------------------------------------------------------------
// 4 and 6. The memory of (V5): per chunk E = (I + L_S)^-1 (V - K S^T), S' = S + E^T Alpha, the products on the
// tensor cores with S held as an accumulator (row i = value coordinate, column j = key coordinate). kMap: two
// such matrices, the map's constant part B_g (from 0, with the values) and its linear part Tr_g (from I,
// without values; each row's update is affine in that row alone), side by side in E's columns; otherwise S
// starts at S_g and the outputs are read.

template <int CM, bool kMap> struct alignas(16) MemorySmem {
  static constexpr int kParts = kMap ? 2 : 1;  // the matrices carried: B_g and Tr_g, or S
  static constexpr int LE = kParts * D + 8;    // E's row stride (= 8 mod 32: fragment reads and stores hit 32 banks)
  float K[CM][LM];   // k_hat_t (outputs: phi(k_t) first, for the read's denominators)
  float Ah[CM][LM];  // alpha_hat_t
  float Q[kMap ? 1 : CM][LM];  // phi(q_t)
  float E[CM][LE];             // v_t (a linear part's columns 0), then the residuals e_t
  float LS[CM][CM + 1];        // k_hat_t . alpha_hat_j, j < t
  float QA[kMap ? 1 : CM][CM + 1];  // phi(q_t) . alpha_hat_j, j <= t
  float inv_k[kMap ? 1 : CM];       // 1 / ||phi(k_t)||
  float den[CM];                    // the read's denominators
  alignas(16) float Zr[kMap ? 1 : CM][LD];  // z_t = z + sum_{j<=t} phi(k_j) for each row t (line 24), then Q S^T
};

template <int CM, bool kMap, ProductOperands Ops> __global__ void __launch_bounds__(kWarps * 32) memory_kernel(RecurrentTensors x, Plan pl) {
  extern __shared__ __align__(16) unsigned char smem[];
  int seq, g;
  if (!my_group(pl, seq, g)) return;
  const int lane = threadIdx.x & 31, g4 = lane >> 2, t4 = lane & 3;
  using Smem = MemorySmem<CM, kMap>;
  Smem& s = reinterpret_cast<Smem*>(smem)[threadIdx.x >> 5];
  constexpr int P = Smem::kParts, LE = Smem::LE, MT = (CM + 15) / 16, KS = (CM + 7) / 8;
  const long long base = static_cast<long long>(seq) * pl.T * D, slot = pl.slot(seq, g);
  // S[q][mi][ni][r] = S_q(16 mi + g4 + 8 (r / 2), 8 ni + 2 t4 + r % 2).
  float S[P][2][4][4];
#pragma unroll
  for (int q = 0; q < P; ++q)
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        // kMap: B_g from 0, Tr_g from I (load_tile from no rows: zeros); otherwise S_g.
        load_tile(S[q][mi][ni], pl.s0 + slot * D * D, D, kMap ? 0 : D, 16 * mi + g4, 8 * ni + 2 * t4);
        if (kMap && q == 1) {
#pragma unroll
          for (int r = 0; r < 4; ++r) S[q][mi][ni][r] = 16 * mi + g4 + 8 * (r >> 1) == 8 * ni + 2 * t4 + (r & 1) ? 1.f : 0.f;
        }
      }
  float z = kMap ? 0.f : pl.z0[slot * D + lane];  // lane = key coordinate
  const int t1 = min(pl.T, (g + 1) * pl.group_tokens);
  for (int c0 = g * pl.group_tokens; c0 < t1;) {
    const int n = chunk_length(c0, pl.T, pl.C, pl.period);
    if (!kMap && pl.chunk_starts) {  // S and z before the chunk, for the chunk-form backward
      float* out = pl.chunk_start_slot(seq, c0);
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) store_tile(S[0][mi][ni], out, D, D, 16 * mi + g4, 8 * ni + 2 * t4);
      out[2 * D * D + lane] = z;
    }
    // The maps read k_hat_t as alphas wrote it (line 9). The outputs need phi(k_t) itself for z and the read's
    // denominators, and normalise it here (the same arithmetic as alphas: the same bits).
    float vv[CM], kin[CM], qraw[kMap ? 1 : CM];  // every row's loads first, so that their latencies overlap
#pragma unroll
    for (int r = 0; r < CM; ++r) {
      const long long at = base + static_cast<long long>(c0 + (r < n ? r : 0)) * D + lane;
      if constexpr (kMap) kin[r] = r < n ? pl.khat[at] : 0.f;
      else kin[r] = x.k[at];
      vv[r] = r < n ? x.v[at] : 0.f;
      s.Ah[r][lane] = r < n ? pl.ahat[at] : 0.f;
      if constexpr (!kMap) qraw[r] = x.q[at];
    }
#pragma unroll
    for (int r = 0; r < CM; ++r) {
      s.E[r][lane] = vv[r];
      if constexpr (kMap) s.E[r][D + lane] = 0.f;  // the linear part has no values
    }
    if constexpr (kMap) {
#pragma unroll
      for (int r = 0; r < CM; ++r) s.K[r][lane] = kin[r];
    } else {
#pragma unroll
      for (int r = 0; r < CM; ++r) {
        s.K[r][lane] = r < n ? elu_plus_one(kin[r]) : 0.f;
        s.Q[r][lane] = r < n ? elu_plus_one(qraw[r]) : 0.f;
      }
#pragma unroll
      for (int r = 0; r < CM; ++r) {  // line 24, token by token as Algorithm 1 sums z: rows past the chunk are zero
        z += s.K[r][lane];
        s.Zr[r][lane] = z;
      }
      __syncwarp();
      if (lane < CM) {  // lane r: row r's key norm and read denominator phi(q_r) . z_r (line 26)
        s.inv_k[lane] = inv_norm(dot_row_shared(s.K[lane], s.K[lane]));
        const float qz = dot_row_shared(s.Q[lane], s.Zr[lane]);
        s.den[lane] = qz < pl.eps ? pl.eps : qz;  // max(., eps), keeping a NaN
      }
      __syncwarp();
#pragma unroll
      for (int r = 0; r < CM; ++r) s.K[r][lane] = r < n ? s.K[r][lane] * s.inv_k[r] : 0.f;  // line 9
    }
    __syncwarp();
    // V - K S_q^T for each part into E's columns, then (outputs) Q S^T for the read into Zr, which is spent.
    // The B fragment, S^T(k, n) = S(8 nb + g, 2t + {0, 1}) with k in the permuted order (rows_fragment), is two
    // of the lane's own accumulator entries.
#pragma unroll
    for (int pass = 0; pass < P + (kMap ? 0 : 1); ++pass) {
      const bool read = pass == P;
      const int q = read ? 0 : pass, ld = read ? LD : LE;
      float* dst = read ? &s.Zr[0][0] : &s.E[0][q * D];
      float e[MT][4][4];
#pragma unroll
      for (int mi = 0; mi < MT; ++mi)
#pragma unroll
        for (int nb = 0; nb < 4; ++nb) load_tile(e[mi][nb], dst, ld, read ? 0 : CM, 16 * mi + g4, 8 * nb + 2 * t4);
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        Tf32 b[4][2];
#pragma unroll
        for (int nb = 0; nb < 4; ++nb)
#pragma unroll
          for (int j = 0; j < 2; ++j) b[nb][j] = operand<Ops>(S[q][nb >> 1][ks][2 * (nb & 1) + j]);
#pragma unroll
        for (int mi = 0; mi < MT; ++mi) {
          Tf32 af[4];
          rows_fragment<Ops, LM>(af, read ? &s.Q[0][0] : &s.K[0][0], 16 * mi + g4, CM, ks, t4);
          if (!read) negate(af);  // -K
#pragma unroll
          for (int nb = 0; nb < 4; ++nb) mma_add<Ops>(e[mi][nb], af, b[nb]);
        }
      }
#pragma unroll
      for (int mi = 0; mi < MT; ++mi)
#pragma unroll
        for (int nb = 0; nb < 4; ++nb) store_tile(e[mi][nb], dst, ld, CM, 16 * mi + g4, 8 * nb + 2 * t4);
    }
    // L_S = strict tril(K Alpha^T) and QA = tril(Q Alpha^T).
    {
      float p[MT][(CM + 7) / 8][4];
      rows_product<Ops, CM, CM, LM>(p, &s.K[0][0], &s.Ah[0][0], g4, t4);
      store_square<CM>(p, &s.LS[0][0], 1, g4, t4);
      if constexpr (!kMap) {
        rows_product<Ops, CM, CM, LM>(p, &s.Q[0][0], &s.Ah[0][0], g4, t4);
        store_square<CM>(p, &s.QA[0][0], 0, g4, t4);
      }
    }
    __syncwarp();
    // The residual sweep (I + L_S) E = V - K S^T, lane = a value coordinate of each part.
    {
      float ev[P][CM];
#pragma unroll
      for (int q = 0; q < P; ++q)
#pragma unroll
        for (int t = 0; t < CM; ++t) ev[q][t] = s.E[t][q * D + lane];
#pragma unroll
      for (int j = 0; j < CM; ++j) {
        row_fence();
#pragma unroll
        for (int t = j + 1; t < CM; ++t) {
          const float l = s.LS[t][j];
#pragma unroll
          for (int q = 0; q < P; ++q) ev[q][t] = fmaf(-l, ev[q][j], ev[q][t]);
        }
      }
#pragma unroll
      for (int q = 0; q < P; ++q)
#pragma unroll
        for (int t = 0; t < CM; ++t) s.E[t][q * D + lane] = ev[q][t];
    }
    __syncwarp();
    if constexpr (!kMap) {
      // O = (Q S_c^T + tril(Q Alpha^T) E) / den (lines 25-26 for the chunk's tokens): A operand QA (row t,
      // k = j), B operand E (row j), both in their natural order, k padded with zeros.
      float qs[MT][4][4];
#pragma unroll
      for (int mi = 0; mi < MT; ++mi)
#pragma unroll
        for (int nb = 0; nb < 4; ++nb) load_tile(qs[mi][nb], &s.Zr[0][0], LD, CM, 16 * mi + g4, 8 * nb + 2 * t4);
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        Tf32 b[4][2];
#pragma unroll
        for (int nb = 0; nb < 4; ++nb) chunk_b_fragment<Ops, LE>(b[nb], &s.E[0][0], CM, ks, 8 * nb + g4, t4);
#pragma unroll
        for (int mi = 0; mi < MT; ++mi) {
          Tf32 af[4];
          chunk_square_fragment<Ops, CM>(af, &s.QA[0][0], ks, 16 * mi + g4, t4);
#pragma unroll
          for (int nb = 0; nb < 4; ++nb) mma_add<Ops>(qs[mi][nb], af, b[nb]);
        }
      }
#pragma unroll
      for (int mi = 0; mi < MT; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int t = 16 * mi + g4 + 8 * h;
          if (t < n) {
            const float den = s.den[t];
            float* o = x.o + base + static_cast<long long>(c0 + t) * D + 2 * t4;
#pragma unroll
            for (int nb = 0; nb < 4; ++nb)
              *reinterpret_cast<float2*>(o + 8 * nb) = isfinite(den) ? make_float2(qs[mi][nb][2 * h] / den, qs[mi][nb][2 * h + 1] / den)
                                                                     : make_float2(__int_as_float(0x7fc00000), __int_as_float(0x7fc00000));
          }
        }
    }
    // S_q' = S_q + E_q^T Alpha on the tensor cores: A operand E_q^T (row i, k = t), B operand Alpha (row t), k
    // padded with zeros.
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      Tf32 b[4][2];
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) chunk_b_fragment<Ops, LM>(b[ni], &s.Ah[0][0], CM, ks, 8 * ni + g4, t4);
#pragma unroll
      for (int q = 0; q < P; ++q)
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) {
          Tf32 af[4];
          chunk_at_fragment<Ops, LE>(af, &s.E[0][0], CM, ks, q * D + 16 * mi + g4, t4);
#pragma unroll
          for (int ni = 0; ni < 4; ++ni) mma_add<Ops>(S[q][mi][ni], af, b[ni]);
        }
    }
    __syncwarp();
    c0 += n;
  }
  if constexpr (kMap) {
#pragma unroll
    for (int q = 0; q < P; ++q) {
      float* out = (q == 0 ? pl.bm : pl.tr) + slot * D * D;
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) store_tile(S[q][mi][ni], out, D, D, 16 * mi + g4, 8 * ni + 2 * t4);
    }
  }
}

// 5. memory_chain: S_{g+1} = S_g Tr_g + B_g, warp w rows w, w + W, ... (W warps), lane = column: each
// thread's rows independent sums, so that its FMAs overlap (a thread per entry waits on one chain of D).
__global__ void __launch_bounds__(kMemoryChainThreads) memory_chain_kernel(Plan pl) {
  constexpr int W = kMemoryChainThreads / 32, kRows = D / W;
  static_assert(D % W == 0, "memory_chain: every warp owns the same number of rows");
  __shared__ float S[D][D + 1], tr[D][D + 1];
  const int seq = blockIdx.x, w = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
  for (int i = 0; i < kRows; ++i) S[w + i * W][lane] = 0.f;
  // Tr_g and B_g's entries of this thread, loaded a group ahead so that the loads' latency overlaps a step.
  long long at = pl.slot(seq, 0) * D * D + w * D + lane;  // + i W D: row w + i W
  float tr_next[kRows], bm_next[kRows];
#pragma unroll
  for (int i = 0; i < kRows; ++i) tr_next[i] = pl.tr[at + i * W * D], bm_next[i] = pl.bm[at + i * W * D];
  for (int g = 0; g < pl.groups; ++g, at += D * D) {  // slot (seq, g + 1) follows slot (seq, g)
    float next[kRows];
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      tr[w + i * W][lane] = tr_next[i];
      pl.s0[at + i * W * D] = S[w + i * W][lane];
      next[i] = bm_next[i];
      if (g + 1 < pl.groups) tr_next[i] = pl.tr[at + D * D + i * W * D], bm_next[i] = pl.bm[at + D * D + i * W * D];
    }
    __syncthreads();
#pragma unroll 8
    for (int k = 0; k < D; ++k) {
      const float t = tr[k][lane];
#pragma unroll
      for (int i = 0; i < kRows; ++i) next[i] = fmaf(S[w + i * W][k], t, next[i]);
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kRows; ++i) S[w + i * W][lane] = next[i];
  }
}

// 7. checkpoints (with x.checkpoints): the state before group g, (S, A, z), into the backward's checkpoint
// slot of token g * group_tokens (gpu/recurrent_forward.hpp's layout: S, A row-major, then z).
__global__ void __launch_bounds__(kCheckpointThreads) checkpoints_kernel(Plan pl) {
  const int seq = blockIdx.x / pl.groups, g = blockIdx.x % pl.groups, e = threadIdx.x;
  float* slot = pl.checkpoints + backward_checkpoint_offset(seq, pl.T, D, g * (pl.group_tokens / kBackwardChunk));
  const long long at = pl.slot(seq, g);
  slot[e] = pl.s0[at * D * D + e];
  slot[D * D + e] = pl.a0[at * D * D + e];
  if (e < D) slot[2 * D * D + e] = pl.z0[at * D + e];
}

// ---------------------------------------------------------------------------------------------------------

template <class Smem, class Kernel>
cudaError_t launch_groups(Kernel kernel, const RecurrentTensors& x, const Plan& pl, cudaStream_t stream) {
  constexpr int bytes = static_cast<int>(kWarps * sizeof(Smem));
  const cudaError_t attr = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (attr != cudaSuccess) return attr;
  const int blocks = pl.seqs * blocks_per_sequence(pl);
  kernel<<<blocks, kWarps * 32, bytes, stream>>>(x, pl);
  return cudaGetLastError();
}

// A launch's sequences in parts, each a contiguous range of sequences on its own stream, every pointer offset
// to the part's first sequence: a part is a smaller launch of the same kernels, each sequence's numbers the
// same bits. The phases are launched part after part, so that while one part's chains (one block per
// sequence, a few SMs) run, the next part's group kernels fill the rest of the device
// (docs/chunkwise-vla-gpu.md, "GPU forward").
struct Part {
  RecurrentTensors x;
  Plan pl;
  cudaStream_t stream;
};

Part part_of(const RecurrentTensors& x, const Plan& pl, int seq0, int seqs, cudaStream_t stream) {
  const long long tokens = static_cast<long long>(seq0) * pl.T * D, slots = pl.slot(seq0, 0);
  Part p{x, pl, stream};
  p.x.q += tokens;
  p.x.k += tokens;
  p.x.v += tokens;
  p.x.u += tokens;
  p.x.o += tokens;
  p.x.B = seqs;
  p.x.H = 1;
  p.pl.seqs = seqs;
  p.pl.pi += slots * 4 * D * D;
  p.pl.zsum += slots * D;
  p.pl.a0 += slots * D * D;
  p.pl.zh += slots * D * D;
  p.pl.z0 += slots * D;
  p.pl.tr += slots * D * D;
  p.pl.bm += slots * D * D;
  p.pl.s0 += slots * D * D;
  p.pl.ahat += tokens;
  p.pl.khat += tokens;
  if (p.pl.checkpoints) p.pl.checkpoints += backward_checkpoint_offset(seq0, pl.T, D, 0);
  if (p.pl.chunk_starts) p.pl.chunk_starts += static_cast<long long>(seq0) * pl.chunks * backward_slot_floats(D);
  p.x.checkpoints = p.pl.checkpoints;
  return p;
}

template <int CM, ProductOperands Ops> cudaError_t run_pipeline(const Part* parts, int n) {
  cudaError_t e = cudaSuccess;
  // Each phase for every part, then the next phase: launch order is the order in which the device takes
  // blocks of kernels that are ready together.
  const auto phase = [&](auto launch) {
    for (int i = 0; i < n && e == cudaSuccess; ++i) e = launch(parts[i].x, parts[i].pl, parts[i].stream);
  };
  phase([](const RecurrentTensors& x, const Plan& pl, cudaStream_t s) { return launch_groups<MapSmem>(group_maps_kernel, x, pl, s); });
  phase([](const RecurrentTensors&, const Plan& pl, cudaStream_t s) {
    penalty_chain_kernel<<<pl.seqs, kPenaltyChainThreads, 0, s>>>(pl);
    cudaError_t r = cudaGetLastError();
    if (r == cudaSuccess && pl.groups > 1 && pl.span > 1) {
      penalty_expand_kernel<<<(pl.seqs * pl.groups + kExpandWarps - 1) / kExpandWarps, kExpandWarps * 32, 0, s>>>(pl);
      r = cudaGetLastError();
    }
    return r;
  });
  phase([](const RecurrentTensors& x, const Plan& pl, cudaStream_t s) { return launch_groups<AlphaSmem<CM>>(alphas_kernel<CM, Ops>, x, pl, s); });
  phase([](const RecurrentTensors& x, const Plan& pl, cudaStream_t s) {
    return launch_groups<MemorySmem<CM, true>>(memory_kernel<CM, true, Ops>, x, pl, s);
  });
  phase([](const RecurrentTensors&, const Plan& pl, cudaStream_t s) {
    memory_chain_kernel<<<pl.seqs, kMemoryChainThreads, 0, s>>>(pl);
    cudaError_t r = cudaGetLastError();
    if (r == cudaSuccess && pl.checkpoints) {
      checkpoints_kernel<<<pl.seqs * pl.groups, kCheckpointThreads, 0, s>>>(pl);
      r = cudaGetLastError();
    }
    return r;
  });
  phase([](const RecurrentTensors& x, const Plan& pl, cudaStream_t s) {
    return launch_groups<MemorySmem<CM, false>>(memory_kernel<CM, false, Ops>, x, pl, s);
  });
  return e;
}

// The register arrays hold CM >= C rows: the smallest compiled size that holds the chunk.
template <ProductOperands Ops> cudaError_t run_chunk_rows(const Part* parts, int n) {
  const int C = parts[0].pl.C;
  return C <= 16 ? run_pipeline<16, Ops>(parts, n) : C <= 20 ? run_pipeline<20, Ops>(parts, n) : run_pipeline<32, Ops>(parts, n);
}

// Blocks of the group-parallel kernels resident at once on the current device: its SMs times the blocks per
// SM of the least occupied of them at chunk size CM, either product mode (group_maps, the same in both,
// bounds it on an H100: its shared memory). Queried once per device; where the query fails, an H100's
// 132 SMs x 2 blocks.
template <int CM> long long resident_group_blocks() {
  constexpr int kDevices = 64, kFallback = 132 * 2;
  static std::atomic<int> cache[kDevices];
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kDevices) {
    cudaGetLastError();  // nothing launched here: leave no error behind for the caller's next check
    return kFallback;
  }
  if (const int n = cache[dev].load(std::memory_order_relaxed)) return n;
  int sms = 0, per_sm = 1 << 30;
  bool ok = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess;
  const auto occupancy = [&](auto kernel, int bytes) {
    int n = 0;
    ok = ok && cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) == cudaSuccess &&
         cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kWarps * 32, bytes) == cudaSuccess;
    per_sm = std::min(per_sm, n);
  };
  occupancy(group_maps_kernel, static_cast<int>(kWarps * sizeof(MapSmem)));
  for (const auto ops : {ProductOperands::Full, ProductOperands::Tf32}) {
    const bool full = ops == ProductOperands::Full;
    occupancy(full ? alphas_kernel<CM, ProductOperands::Full> : alphas_kernel<CM, ProductOperands::Tf32>,
              static_cast<int>(kWarps * sizeof(AlphaSmem<CM>)));
    occupancy(full ? memory_kernel<CM, true, ProductOperands::Full> : memory_kernel<CM, true, ProductOperands::Tf32>,
              static_cast<int>(kWarps * sizeof(MemorySmem<CM, true>)));
    occupancy(full ? memory_kernel<CM, false, ProductOperands::Full> : memory_kernel<CM, false, ProductOperands::Tf32>,
              static_cast<int>(kWarps * sizeof(MemorySmem<CM, false>)));
  }
  if (!ok || sms < 1 || per_sm < 1) {
    cudaGetLastError();
    return kFallback;
  }
  cache[dev].store(sms * per_sm, std::memory_order_relaxed);
  return sms * per_sm;
}

long long resident_group_blocks_for(int C) {
  return C <= 16 ? resident_group_blocks<16>() : C <= 20 ? resident_group_blocks<20>() : resident_group_blocks<32>();
}

// The streams beside the caller's that a launch's parts run on, with the events that fork them from the
// caller's stream and join them back: created once per host thread and device and kept for the process's life;
// threads never share them. Two launches from one thread on different caller streams share them, which puts
// their later parts one after the other: less overlap, never a wrong order (each waits only on events recorded
// before it). Null where a creation failed: the launch then runs as one part.
struct PartStreams {
  cudaStream_t side[kChunkedVlaMaxParts - 1];
  cudaEvent_t fork, join;
};
PartStreams* part_streams() {
  constexpr int kDevices = 64;
  thread_local PartStreams cache[kDevices];
  thread_local signed char state[kDevices];  // 0 not tried, 1 ready, -1 failed
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kDevices) {
    cudaGetLastError();
    return nullptr;
  }
  if (state[dev] == 0) {
    PartStreams& ps = cache[dev];
    bool ok = cudaEventCreateWithFlags(&ps.fork, cudaEventDisableTiming) == cudaSuccess &&
              cudaEventCreateWithFlags(&ps.join, cudaEventDisableTiming) == cudaSuccess;
    for (int i = 0; i < kChunkedVlaMaxParts - 1; ++i) ok = ok && cudaStreamCreateWithFlags(&ps.side[i], cudaStreamNonBlocking) == cudaSuccess;
    if (!ok) cudaGetLastError();
    state[dev] = ok ? 1 : -1;
  }
  return state[dev] == 1 ? &cache[dev] : nullptr;
}

}  // namespace

int chunked_vla_chunk(int chunk, const RecurrentParams& p) {
  int c = chunk == 0 ? kChunkedVlaDefaultChunk : chunk;
  if (p.refresh_period > 0 && p.refresh_period < c) c = p.refresh_period;
  return c;
}

// The unit a group counts: a refresh segment, or a chunk without the refresh.
static int segment_tokens(int chunk, const RecurrentParams& p) { return p.refresh_period > 0 ? p.refresh_period : chunked_vla_chunk(chunk, p); }

int chunked_vla_group(int chunk, int group, const RecurrentParams& p, int seqs, int T, bool checkpoints) {
  if (group > 0) return group;
  const int segment = segment_tokens(chunk, p);
  const int c = chunked_vla_chunk(chunk, p);
  const long long wave = resident_group_blocks_for(c);
  // With checkpoints, groups of a whole number of kBackwardChunk tokens: multiples of the smallest such m,
  // which divides kBackwardChunk (32) and so also kChunkedVlaMaxGroup (64).
  const int m = checkpoints ? kBackwardChunk / std::gcd(segment, kBackwardChunk) : 1;
  int best = m;
  double best_cost = 0.0;
  for (int g = m; g <= kChunkedVlaMaxGroup; g += m) {
    const long long tokens = static_cast<long long>(g) * segment, groups = (T + tokens - 1) / tokens;
    const long long blocks = seqs * group_blocks(groups), waves = (blocks + wave - 1) / wave;
    const double cost = static_cast<double>(waves * tokens) + kChunkedVlaChainStepTokens * static_cast<double>(groups);
    if (g == m || cost < best_cost) {
      best = g;
      best_cost = cost;
    }
    if (groups == 1) break;  // a longer group only adds chunks past the sequence's end
  }
  return best;
}

int chunked_vla_group_tokens(int chunk, int group, const RecurrentParams& p, int seqs, int T, bool checkpoints) {
  return chunked_vla_group(chunk, group, p, seqs, T, checkpoints) * segment_tokens(chunk, p);
}

int chunked_vla_parts(int chunk, int group, const RecurrentParams& p, int seqs, int T, bool checkpoints) {
  if (seqs < 1 || T < 1) return 1;
  const long long group_tokens = chunked_vla_group_tokens(chunk, group, p, seqs, T, checkpoints);
  const long long per_part =
      std::max(1LL, resident_group_blocks_for(chunked_vla_chunk(chunk, p)) / group_blocks((T + group_tokens - 1) / group_tokens));
  return static_cast<int>(std::min<long long>(kChunkedVlaMaxParts, (seqs + per_part - 1) / per_part));
}

std::size_t chunked_vla_chunk_starts_floats(int B, int H, int T, int chunk, const RecurrentParams& p) {
  if (B < 1 || H < 1 || T < 1 || chunk < 0 || chunk > kChunkedVlaMaxChunk) return 0;
  const int C = chunked_vla_chunk(chunk, p);
  return std::size_t(B) * H * (chunk_of(T - 1, C, p.refresh_period) + 1) * backward_slot_floats(D);
}

// The workspace's floats for `slots` (sequence, group) pairs and seqs x T tokens: per slot Pi_g (4 d^2), the
// key sum (d), A_g (d^2), the pair's Z (d^2), z_g (d), Tr_g, B_g and S_g (3 d^2); per token alpha_hat and k_hat.
static long long workspace_floats(long long slots, long long seqs, long long T) {
  return slots * (4 * D * D + D + 2 * D * D + D + 3 * D * D) + 2 * seqs * T * D;
}

std::size_t chunked_vla_forward_workspace_floats(int B, int H, int T, int chunk, int group, const RecurrentParams& p, bool checkpoints) {
  if (B < 1 || H < 1 || T < 1 || chunk < 0 || chunk > kChunkedVlaMaxChunk || group < 0) return 0;
  const long long seqs = static_cast<long long>(B) * H;
  const long long group_tokens = chunked_vla_group_tokens(chunk, group, p, static_cast<int>(seqs), T, checkpoints);
  return static_cast<std::size_t>(workspace_floats(seqs * ((T + group_tokens - 1) / group_tokens), seqs, T));
}

cudaError_t chunked_vla_forward(const RecurrentTensors& x, const RecurrentParams& p, int chunk, int group, cudaStream_t stream,
                                float* chunk_starts, ProductOperands products, float* workspace, std::size_t workspace_floats_given) {
  if (!x.q || !x.k || !x.v || !x.u || !x.o || x.B < 1 || x.H < 1 || x.T < 1) return cudaErrorInvalidValue;
  if (chunk < 0 || chunk > kChunkedVlaMaxChunk || group < 0 || x.d != D) return cudaErrorInvalidValue;
  if (!p.normalise_key) return cudaErrorInvalidValue;  // every kernel here reads k_hat = unit(phi(k)) (line 9)
  // delta_t = 1 + u^T A u > 1 while A is SPD: the clamp of line 13 cannot fire for eps <= 1, which the
  // chunk form assumes (its pivots are the unclamped delta_t); above 1 it could, and the fused kernel's.
  if (!(p.eps <= 1.f)) return cudaErrorInvalidValue;
  if (products != ProductOperands::Full && products != ProductOperands::Tf32) return cudaErrorInvalidValue;
  Plan pl{};
  pl.T = x.T;
  pl.C = chunked_vla_chunk(chunk, p);
  pl.period = p.refresh_period;
  const int group_segments = chunked_vla_group(chunk, group, p, x.B * x.H, x.T, x.checkpoints != nullptr);
  pl.group_tokens = group_segments * segment_tokens(chunk, p);
  pl.checkpoints = x.checkpoints;
  pl.chunk_starts = chunk_starts;
  pl.chunks = chunk_of(x.T - 1, pl.C, pl.period) + 1;
  if (pl.checkpoints && pl.group_tokens % kBackwardChunk != 0) return cudaErrorInvalidValue;
  pl.groups = (x.T + pl.group_tokens - 1) / pl.group_tokens;
  pl.span = std::max(1, kChunkedVlaChainSegments / group_segments);
  pl.seqs = x.B * x.H;
  pl.lambda0 = p.lambda0;
  pl.eta = p.refresh_eta;
  pl.eps = p.eps;
  const long long slots = static_cast<long long>(pl.seqs) * pl.groups;
  const long long floats = workspace_floats(slots, pl.seqs, x.T);
  // The caller's workspace, or one of the stream-ordered pool's, freed on the stream below.
  if (workspace && workspace_floats_given < static_cast<std::size_t>(floats)) return cudaErrorInvalidValue;
  float* ws = workspace;
  cudaError_t e = ws ? cudaSuccess : cudaMallocAsync(&ws, floats * sizeof(float), stream);
  if (e != cudaSuccess) return e;
  float* at = ws;
  const auto take = [&](long long n) { float* r = at; at += n; return r; };
  pl.pi = take(slots * 4 * D * D);
  pl.zsum = take(slots * D);
  pl.a0 = take(slots * D * D);
  pl.zh = take(slots * D * D);
  pl.z0 = take(slots * D);
  pl.tr = take(slots * D * D);
  pl.bm = take(slots * D * D);
  pl.s0 = take(slots * D * D);
  pl.ahat = take(static_cast<long long>(pl.seqs) * x.T * D);
  pl.khat = take(static_cast<long long>(pl.seqs) * x.T * D);
  int n = chunked_vla_parts(chunk, group_segments, p, pl.seqs, pl.T, x.checkpoints != nullptr);
  PartStreams* ps = n > 1 ? part_streams() : nullptr;
  if (!ps) n = 1;
  Part parts[kChunkedVlaMaxParts];
  for (int i = 0, seq0 = 0; i < n; ++i) {
    const int seqs = (pl.seqs - seq0) / (n - i);  // as even as the sequences allow
    parts[i] = part_of(x, pl, seq0, seqs, i == 0 ? stream : ps->side[i - 1]);
    seq0 += seqs;
  }
  if (n > 1 && (e = cudaEventRecord(ps->fork, stream)) == cudaSuccess)
    for (int i = 1; i < n && e == cudaSuccess; ++i) e = cudaStreamWaitEvent(parts[i].stream, ps->fork, 0);
  if (e == cudaSuccess)
    e = products == ProductOperands::Full ? run_chunk_rows<ProductOperands::Full>(parts, n) : run_chunk_rows<ProductOperands::Tf32>(parts, n);
  // The side streams join the caller's whatever happened above, before the workspace is freed on it.
  for (int i = 1; i < n; ++i) {
    cudaError_t j = cudaEventRecord(ps->join, parts[i].stream);
    if (j == cudaSuccess) j = cudaStreamWaitEvent(stream, ps->join, 0);
    if (e == cudaSuccess) e = j;
  }
  const cudaError_t f = workspace ? cudaSuccess : cudaFreeAsync(ws, stream);
  return e != cudaSuccess ? e : f;
}

}  // namespace vla::gpu
