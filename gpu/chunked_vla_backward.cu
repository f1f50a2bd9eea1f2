// The chunk-form VLA backward on the GPU; contract in gpu/chunked_vla_backward.hpp. Each step is an equation
// of docs/chunkwise-vla.md ((V1)-(V5) for a chunk's forward again, (A1)-(A7) for its adjoint), in the order
// of the CPU reference core/rules/vla/chunkwise_adjoint.hpp (vla_chunk_adjoint), which a reader can hold
// line by line against walk_kernel below.
//
// Parallel structure. A sequence is cut into groups of whole refresh segments; one block of kThreads threads
// walks one (sequence, group), its chunks from the last, and the chains between the walks (C1, C2 of "The
// backward across groups") are the token-walk backward's own (gpu/group_chain.cuh):
//   B1  from the zero carry: the chunk's forward again ((V1)-(V5), the read's denominators), stashed for B2
//       and B3; the dS and dz parts of its adjoint and R_g <- R_g R_c, with R_c = I - Alpha_hat^T (I + L_S)^-1 K
//       (dS_start = dS_end R_c + the chunk's own terms)
//   C1  the true (dS, dz) at every group's end
//   B2  from (dS_b, dz_b, 0) and the stash: the whole adjoint, leaving sym(dA^0_a), and Phi_g <- Phi_g Phi_c
//       with Phi_c = I - Y^T D^-1 L^-1 U (= F_n ... F_1 of the token adjoint: A' = Phi_c A_c before the
//       refresh); writes the chunk's rows of dq, dk, dv (final: dA reaches only du) and its U-bar so far into
//       du's
//   C2  the true Sigma = sym(dA) at every group's end
//   B3  from Sigma_b alone: the adjoint is linear in the carry and dA is read only by (A5), so the part of
//       dA that Sigma_b adds is walked by (A5), (A6) alone (W, Y, L, D^-1 from the stash); its U-bar added to
//       B2's, line 10's adjoint gives du
// A chunk's matrices live in shared memory (row stride d + 1 or C + 1: a row walk and a column walk both hit
// 32 banks), padded to the compiled chunk rows with zero rows. Each step is a block-wide loop over its
// result's entries (mm: 4 rows of one column per thread, fp32 FMA) or, for the triangular solves and the
// L D L^T, one column or row per lane held in registers; the steps are separated by barriers. The walks are
// latency-bound (docs/chunkwise-vla-gpu.md, "GPU backward in the chunk form": its floor, and why the products are
// not on the tensor cores).
#include "gpu/chunked_vla_backward.hpp"

#include "core/phi.hpp"
#include "gpu/group_chain.cuh"

#include <algorithm>

namespace vla::gpu {
namespace {

using group_chain::GroupArgs;
using group_chain::kChainThreads;
using group_chain::vla_group_chain_kernel;

constexpr int D = 32;          // head width
constexpr int RD = D + 1;      // row stride of the C x d and d x d matrices (odd: row and column walks hit 32 banks)
constexpr int kThreads = 256;  // threads per walk block
constexpr unsigned kFull = 0xffffffffu;

// A shared matrix of row stride LD, or (kT) its transpose in the same memory: entry (i, j) at p[i LD + j]
// or p[j LD + i]. Strides are compile-time, so the products below index with constants.
template <int LD, bool kT = false> struct View {
  float* p;
  __device__ __forceinline__ float& operator()(int i, int j) const { return kT ? p[j * LD + i] : p[i * LD + j]; }
  __device__ __forceinline__ View<LD, !kT> t() const { return {p}; }
};

// Which entries of a product are kept: all, j <= i (tril), or j < i (strict tril); the others are set to 0.
enum class Tri { Full, Lower, Strict };
__device__ __forceinline__ bool kept(Tri t, int i, int j) { return t == Tri::Full || (t == Tri::Lower ? j <= i : j < i); }

// Y = alpha A B (M x N, K terms), or Y += alpha A B with acc; entries outside `tri` set to zero (acc: left as
// they are). Each thread computes 4 rows of one column (a B entry read once for 4 products; the A entries
// are broadcast reads). Y must not alias A or B. No barrier: the caller ends the phase.
template <int M, int N, int K, class YV, class AV, class BV>
__device__ __forceinline__ void mm(YV Y, AV A, BV B, float alpha, bool acc, Tri tri = Tri::Full) {
  static_assert(M % 4 == 0, "mm: rows in blocks of 4");
  for (int tile = threadIdx.x; tile < (M / 4) * N; tile += kThreads) {
    const int i0 = (tile / N) * 4, j = tile % N;
    float s[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int c = 0; c < K; ++c) {
      const float b = B(c, j);
#pragma unroll
      for (int r = 0; r < 4; ++r) s[r] = fmaf(A(i0 + r, c), b, s[r]);
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int i = i0 + r;
      if (!kept(tri, i, j)) {
        if (!acc) Y(i, j) = 0.f;
      } else {
        const float v = alpha * s[r];
        Y(i, j) = acc ? Y(i, j) + v : v;
      }
    }
  }
}

// X <- L^-1 X (kT: X <- L^-T X) for a unit lower triangular L (CM x CM; only its strict lower part read)
// and X CM x NC (NC <= 32), in place, by the warp of threads first.. first + 31: lane j holds column j in
// registers, and each pivot's column updates every later (kT: earlier) row at once (independent FMAs). No
// barrier.
template <int CM, int NC, bool kT, class LV, class XV> __device__ __forceinline__ void solve_unit_lower(LV L, XV X, int first) {
  const int j = static_cast<int>(threadIdx.x) - first;
  if (j < 0 || j >= NC) return;
  float x[CM];
#pragma unroll
  for (int i = 0; i < CM; ++i) x[i] = X(i, j);
#pragma unroll
  for (int step = 0; step < CM; ++step) {
    const int c = kT ? CM - 1 - step : step;  // the pivot: its x is final
#pragma unroll
    for (int i = 0; i < CM; ++i)
      if (kT ? i < c : i > c) x[i] = fmaf(-(kT ? L(c, i) : L(i, c)), x[c], x[i]);
  }
#pragma unroll
  for (int i = 0; i < CM; ++i) X(i, j) = x[i];
}
template <int CM, int NC, class LV, class XV> __device__ __forceinline__ void solve_lower(LV L, XV X, int first) {
  solve_unit_lower<CM, NC, false>(L, X, first);
}
template <int CM, int NC, class LV, class XV> __device__ __forceinline__ void solve_lower_t(LV L, XV X, int first) {
  solve_unit_lower<CM, NC, true>(L, X, first);
}

// (V1): G = L D L^T, unpivoted, right-looking, by the first warp, lane i holding row i in registers: after
// pivot j every row i > j subtracts L_ij G_kj from its entries k in (j, i] (G_kj from lane k by a shuffle).
// G's lower part -> L (unit lower, zero above: products read it whole) and dinv = D^-1. The pivots are
// Alg. 1's delta_t, clamped at eps as line 13 (which cannot fire for eps <= 1 while A is SPD). No barrier.
template <int CM, class GV, class LV> __device__ __forceinline__ void ldl(GV G, LV L, float* dinv, float eps) {
  static_assert(CM <= 32, "ldl: one lane per row");
  const int i = threadIdx.x;
  if (i >= 32) return;
  float gr[CM];
#pragma unroll
  for (int k = 0; k < CM; ++k) gr[k] = i < CM && k <= i ? G(i, k) : 0.f;
  float inv_own = 1.f;
#pragma unroll
  for (int j = 0; j < CM; ++j) {
    float djj = __shfl_sync(kFull, gr[j], j);
    djj = djj >= eps ? djj : eps;
    const float inv = 1.f / djj;
    const float lij = i > j ? gr[j] * inv : 0.f;
#pragma unroll
    for (int k = j + 1; k < CM; ++k) {
      const float gkj = __shfl_sync(kFull, gr[j], k);
      if (k <= i) gr[k] = fmaf(-lij, gkj, gr[k]);
    }
    if (i > j) gr[j] = lij;
    if (i == j) inv_own = inv;
  }
  if (i < CM) {
#pragma unroll
    for (int k = 0; k < CM; ++k) L(i, k) = k < i ? gr[k] : (k == i ? 1.f : 0.f);
    dinv[i] = inv_own;
  }
}

// x . y over a row of d entries.
__device__ __forceinline__ float row_dot(const float* x, const float* y) {
  float s0 = 0.f, s1 = 0.f;
#pragma unroll
  for (int c = 0; c < D; c += 2) {
    s0 = fmaf(x[c], y[c], s0);
    s1 = fmaf(x[c + 1], y[c + 1], s1);
  }
  return s0 + s1;
}

// unit(): x / ||x||, x itself where ||x|| = 0 (the zero rows that pad a chunk to CM, as core's unit()).
__device__ __forceinline__ float unit_entry(float x, float norm) { return norm != 0.f ? x / norm : x; }

enum class Walk { B1, B2, B3 };

// A chunk's matrices, CM rows: a chunk of n < CM tokens is padded with zero rows, which every step below
// keeps zero (G's padding block is I, its L D L^T's too), so that every loop runs over compile-time CM.
// About 76 KB at CM = 20, 117 KB at CM = 32.
template <int CM> struct alignas(16) WalkSmem {
  float Ac[D][RD], Sc[D][RD];  // the state before the chunk (A symmetrised)
  float dS[D][RD], dA[D][RD];  // the carry: at the chunk's end on entry, at its start on exit
  float P[D][RD];              // R_g (B1) or Phi_g (B2), the chunk maps' product so far
  // C x d: the chunk's rows
  float Qf[CM][RD], Kf[CM][RD], K[CM][RD], U[CM][RD];  // phi(q), phi(k), k_hat, u (lines 8-10)
  float W[CM][RD], Y[CM][RD], Ah[CM][RD], E[CM][RD];   // (V1) W = U A_c, (V2) Y, line 20's alpha_hat, (V5) E
  float Zt[CM][RD];                                    // z_t (line 24), then z_t-bar, then scratch
  float dOn[CM][RD], dQf[CM][RD], dKf[CM][RD], F[CM][RD], dAh[CM][RD], dK[CM][RD], dY[CM][RD];
  // C x C
  float L[CM][CM + 1], N[CM][CM + 1], Pm[CM][CM + 1], LS[CM][CM + 1], M[CM][CM + 1], T1[CM][CM + 1], T2[CM][CM + 1];
  float dinv[CM], na[CM], den[CM], dden[CM];  // adjacent: stashed as one block
  float nk[CM], nu[CM], ddinv[CM], rd[CM];
  float dz[D];
};

// Floats per chunk of the stash B1 leaves for B2 and B3 (its forward of the chunk, walk_kernel's layout).
__host__ __device__ constexpr long long stash_floats(int cm) { return 4LL * cm * D + 4LL * cm * cm + 4LL * cm; }
// The chunk rows a kernel is compiled for (WalkSmem's CM) at chunk length C.
constexpr int compiled_rows(int C) { return C <= 16 ? 16 : C <= 20 ? 20 : 32; }

// A global-to-shared copy of 4 bytes that does not hold the thread (cp.async): a loop of plain loads and
// stores would wait one memory round trip per iteration, the stores being ordered after the loads. The
// copies are complete for the thread that issued them after async_wait(), for the block after a barrier.
__device__ __forceinline__ void async_copy(float* dst_shared, const float* src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst_shared));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(d), "l"(src) : "memory");
}
__device__ __forceinline__ void async_wait() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// Between a shared matrix (R rows of stride ld) and its compact row-major copy in global memory. No barrier;
// load_rows is asynchronous (async_copy).
template <int R, int Cn> __device__ __forceinline__ void store_rows(float* dst, const float* src, int ld) {
  for (int e = threadIdx.x; e < R * Cn; e += kThreads) dst[e] = src[(e / Cn) * ld + e % Cn];
}
template <int R, int Cn> __device__ __forceinline__ void load_rows(float* dst, int ld, const float* src) {
  for (int e = threadIdx.x; e < R * Cn; e += kThreads) async_copy(dst + (e / Cn) * ld + e % Cn, src + e);
}

struct WalkArgs {
  GroupArgs ga;
  float* stash;         // per chunk, stash_floats(CM): written by B1, read by B2 and B3
  const float* starts;  // chunk_starts
  int T, C, period, group_tokens, chunks;
  float eps, eta;
};

// Blocks per SM the walk kernel is compiled for: its shared memory allows 3 at CM <= 20 (76 KB each on the
// H100's 228 KB), 1 at CM = 32, and registers are capped to match (85 per thread at 3 blocks of 256).
template <int CM> constexpr int kWalkBlocksPerSm = CM <= 20 ? 3 : 1;

template <int CM, Walk W>
__global__ void __launch_bounds__(kThreads, kWalkBlocksPerSm<CM>)
    walk_kernel(const RecurrentTensors x, const RecurrentGrads g, const WalkArgs wa) {
  extern __shared__ __align__(16) unsigned char smem[];
  using Smem = WalkSmem<CM>;
  Smem& s = *reinterpret_cast<Smem*>(smem);
  constexpr int RC = CM + 1;
  using Rows = View<RD>;   // C x d and d x d
  using Sq = View<RC>;     // C x C
  using Wide = View<CM>;   // d x C products in a C x d matrix's memory
  constexpr bool kWhole = W != Walk::B3;  // the chunk's whole inputs and stash (B3 reads u, W, Y, L, D^-1 only)
  // The stash's layout (stash_floats): W, Y, Alpha_hat, E (C x d), L, N, L_S, M (C x C), dinv, na, den, dden.
  constexpr int kStashY = CM * D, kStashAh = 2 * CM * D, kStashE = 3 * CM * D, kStashL = 4 * CM * D, kStashN = kStashL + CM * CM,
                kStashLS = kStashN + CM * CM, kStashM = kStashLS + CM * CM, kStashVec = kStashM + CM * CM;
  const int tid = threadIdx.x;
  const int seq = blockIdx.x / wa.ga.groups, grp = blockIdx.x % wa.ga.groups;
  const long long slot = static_cast<long long>(seq) * wa.ga.groups + grp;
  constexpr long long kCarry = 2LL * D * D + D;
  const long long base = static_cast<long long>(seq) * wa.T * D;
  const float u_scale = 1.f / sqrtf(static_cast<float>(D));
  const Rows Ac{&s.Ac[0][0]}, Sc{&s.Sc[0][0]}, dS{&s.dS[0][0]}, dA{&s.dA[0][0]}, P{&s.P[0][0]};
  const Rows Qf{&s.Qf[0][0]}, K{&s.K[0][0]}, U{&s.U[0][0]}, Wm{&s.W[0][0]}, Y{&s.Y[0][0]}, Ah{&s.Ah[0][0]}, E{&s.E[0][0]};
  const Rows Zt{&s.Zt[0][0]}, dOn{&s.dOn[0][0]}, dQf{&s.dQf[0][0]}, F{&s.F[0][0]}, dAh{&s.dAh[0][0]}, dK{&s.dK[0][0]}, dY{&s.dY[0][0]};
  const Sq L{&s.L[0][0]}, N{&s.N[0][0]}, Pm{&s.Pm[0][0]}, LS{&s.LS[0][0]}, M{&s.M[0][0]}, T1{&s.T1[0][0]}, T2{&s.T2[0][0]};

  // The carry at the group's end: zero (B1), the chains' (dS_b, dz_b) and, in B3, Sigma_b; the product from I.
  const float* carry = wa.ga.carry + slot * kCarry;
  for (int e = tid; e < D * D; e += kThreads) {
    const int r = e / D, c = e % D;
    s.dS[r][c] = W == Walk::B1 ? 0.f : carry[e];
    s.dA[r][c] = W == Walk::B3 ? carry[D * D + e] : 0.f;
    s.P[r][c] = r == c ? 1.f : 0.f;
  }
  for (int c = tid; c < D; c += kThreads) s.dz[c] = W == Walk::B1 ? 0.f : carry[2 * D * D + c];

  // (A6) from Y-bar (in dY) and (D^-1)-bar (ddinv), after a barrier: U-bar into Zt, A_c-bar's terms into dA, and
  // in B2 Phi_g <- Phi_g Phi_c. Shared by B2's whole adjoint and B3's adjoint of the carried Sigma alone.
  const auto adjoint_factor = [&]() {
    if constexpr (W == Walk::B2) {  // L^-1 U for Phi_c, in F's memory (F is spent)
      for (int e = tid; e < CM * D; e += kThreads) s.F[e / D][e % D] = s.U[e / D][e % D];
      __syncthreads();
    }
    // (A6) Y = L^-1 W: W-bar = L^-T Y-bar (in dY), beside (B2) L^-1 U.
    solve_lower_t<CM, D>(L, dY, 0);
    if constexpr (W == Walk::B2) solve_lower<CM, D>(L, F, 32);
    __syncthreads();
    mm<CM, CM, D>(T1, dY, Y.t(), -1.f, false, Tri::Strict);  // L-bar = -strict tril(W-bar Y^T)
    if constexpr (W == Walk::B2) {
      // Phi_g <- Phi_g Phi_c, Phi_c = I - Y^T D^-1 (L^-1 U): Phi_g - (Phi_g Y^T D^-1) (L^-1 U), Phi_g Y^T
      // (d x C) in dAh's memory (Alpha-bar is spent).
      const Wide PY{&s.dAh[0][0]};
      mm<D, CM, D>(PY, P, Y.t(), 1.f, false);
      __syncthreads();
      for (int e = tid; e < D * CM; e += kThreads) PY(e / CM, e % CM) *= s.dinv[e % CM];
      __syncthreads();
      mm<D, D, CM>(P, PY, F, -1.f, true);
    }
    __syncthreads();
    // Z = strict tril(L^T L-bar D^-1) + diag(D-bar), D-bar = -(D^-1)-bar D^-2 (T2).
    mm<CM, CM, CM>(T2, L.t(), T1, 1.f, false, Tri::Strict);
    __syncthreads();
    for (int e = tid; e < CM * CM; e += kThreads) {
      const int i = e / CM, j = e % CM;
      if (i == j) s.T2[i][j] = -s.ddinv[j] * s.dinv[j] * s.dinv[j];
      else s.T2[i][j] *= s.dinv[j];
    }
    __syncthreads();
    // G-bar = L^-T Z L^-1: X = L^-T (L^-T Z)^T, G-bar = X^T; only sym(G-bar) reaches anything (G is symmetric).
    solve_lower_t<CM, CM>(L, T2, 0);
    __syncthreads();
    solve_lower_t<CM, CM>(L, T2.t(), 0);  // in place on the transpose: T2 = X^T = G-bar
    __syncthreads();
    for (int e = tid; e < CM * CM; e += kThreads) {
      const int i = e / CM, j = e % CM;
      s.T1[i][j] = 0.5f * (s.T2[i][j] + s.T2[j][i]);  // sym(G-bar)
    }
    __syncthreads();
    // G = I + U A_c U^T, W = U A_c: U-bar = 2 sym(G-bar) W + W-bar A_c (in Zt), A_c-bar += U^T (sym(G-bar) U + W-bar).
    mm<CM, D, CM>(Zt, T1, Wm, 2.f, false);
    __syncthreads();
    mm<CM, D, D>(Zt, dY, Ac, 1.f, true);
    __syncthreads();
    mm<CM, D, CM>(dY, T1, U, 1.f, true);
    __syncthreads();
    mm<D, D, CM>(dA, U.t(), dY, 1.f, true);
  };

  const int t0 = grp * wa.group_tokens, t1 = min(wa.T, t0 + wa.group_tokens);
  const int i_first = chunk_of(t0, wa.C, wa.period), i_last = chunk_of(t1 - 1, wa.C, wa.period);
  for (int ci = i_last; ci >= i_first; --ci) {
    const int c0 = chunk_start(ci, wa.C, wa.period), n = chunk_length(c0, wa.T, wa.C, wa.period);
    const float shift = wa.period > 0 && (c0 + n) % wa.period == 0 ? wa.eta : 0.f;
    __syncthreads();  // the previous chunk's readers are done with every buffer
    const float* st = wa.starts + (static_cast<long long>(seq) * wa.chunks + ci) * backward_slot_floats(D);
    float* st_out = wa.stash + (static_cast<long long>(seq) * wa.chunks + ci) * stash_floats(CM);
    // Lines 8-10's inputs (rows n.. zero); dO into dOn; V into E for B1, which computes the residuals in
    // place (B2 reads them from B1's stash); in B3, B2's U-bar of the chunk into dOn (B3 adds its own). Every
    // global read is issued before the first shared store, so that they wait one memory round trip together.
    constexpr int kSq = D * D / kThreads, kRow = (CM * D + kThreads - 1) / kThreads;
    float ra[kSq], rs[kSq], ru[kRow], rq[kRow], rk[kRow], rv[kRow], ro[kRow];
    const float rz = kWhole && tid >= 32 && tid < 32 + D ? st[2 * D * D + tid - 32] : 0.f;  // z_c
#pragma unroll
    for (int i = 0; i < kSq; ++i) {
      const int e = tid + i * kThreads;
      if constexpr (kWhole) rs[i] = st[e];
      ra[i] = st[D * D + e];
    }
#pragma unroll
    for (int i = 0; i < kRow; ++i) {
      const int e = tid + i * kThreads, t = e / D;
      const long long at = base + static_cast<long long>(c0 + t) * D + e % D;
      const bool in = e < CM * D && t < n;
      ru[i] = in ? x.u[at] : 0.f;
      if constexpr (kWhole) {
        rq[i] = in ? x.q[at] : 0.f;
        rk[i] = in ? x.k[at] : 0.f;
        if constexpr (W == Walk::B1) rv[i] = in ? x.v[at] : 0.f;
        ro[i] = in ? g.dout[at] : 0.f;
      } else {
        ro[i] = in ? g.du[at] : 0.f;
      }
    }
#pragma unroll
    for (int i = 0; i < kSq; ++i) {
      const int e = tid + i * kThreads, r = e / D, c = e % D;
      if constexpr (kWhole) s.Sc[r][c] = rs[i];
      s.Ac[r][c] = ra[i];  // the state before the chunk, symmetrised below
    }
#pragma unroll
    for (int i = 0; i < kRow; ++i) {
      const int e = tid + i * kThreads, t = e / D, c = e % D;
      if (e >= CM * D) continue;
      const bool in = t < n;
      s.U[t][c] = ru[i];
      s.dOn[t][c] = ro[i];
      if constexpr (kWhole) {
        s.Qf[t][c] = in ? elu_plus_one(rq[i]) : 0.f;
        s.Kf[t][c] = in ? elu_plus_one(rk[i]) : 0.f;
        if constexpr (W == Walk::B1) s.E[t][c] = rv[i];
      }
    }
    __syncthreads();
    if (tid < CM) {
      if constexpr (kWhole) s.nk[tid] = sqrtf(row_dot(s.Kf[tid], s.Kf[tid]));
      s.nu[tid] = sqrtf(row_dot(s.U[tid], s.U[tid]));
    } else if (kWhole && tid >= 32 && tid < 32 + D) {  // line 24: z_t = z_c + sum_{j <= t} phi(k_j), one thread per coordinate
      const int c = tid - 32;
      float z = rz;
#pragma unroll
      for (int t = 0; t < CM; ++t) s.Zt[t][c] = z += s.Kf[t][c];
    } else if (tid >= 64) {  // A symmetrised (the forward's products leave it symmetric up to rounding)
      for (int e = tid - 64; e < D * D; e += kThreads - 64) {
        const int r = e / D, c = e % D;
        if (r < c) s.Ac[r][c] = s.Ac[c][r] = 0.5f * (s.Ac[r][c] + s.Ac[c][r]);
      }
    }
    __syncthreads();
    for (int e = tid; e < CM * D; e += kThreads) {
      const int t = e / D, c = e % D;
      if constexpr (kWhole) s.K[t][c] = unit_entry(s.Kf[t][c], s.nk[t]);  // line 9
      s.U[t][c] = unit_entry(s.U[t][c], s.nu[t]) * u_scale;  // line 10
    }
    __syncthreads();

    if constexpr (W == Walk::B1) {
      // The chunk's forward again, (V1)-(V5).
      mm<CM, D, D>(Wm, U, Ac, 1.f, false);  // (V1) W = U A_c
      __syncthreads();
      mm<CM, CM, D>(T1, U, Wm.t(), 1.f, false, Tri::Lower);  // G = I + U W^T (its lower part)
      __syncthreads();
      if (tid < CM) s.T1[tid][tid] += 1.f;
      __syncthreads();
      ldl<CM>(T1, L, s.dinv, wa.eps);  // G = L D L^T
      for (int e = tid; e < CM * D; e += kThreads) s.Y[e / D][e % D] = s.W[e / D][e % D];
      __syncthreads();
      solve_lower<CM, D>(L, Y, 0);  // (V2) Y = L^-1 W: rows y_t = A_{t-1} u_t
      mm<CM, D, D>(Ah, K, Ac, 1.f, false);  // Alpha = K A_c - P Y (+ shift k_hat on the last row), first K A_c
      __syncthreads();
      mm<CM, CM, D>(N, K, Y.t(), 1.f, false, Tri::Lower);  // (V3) N = tril(K Y^T), P = N D^-1
      __syncthreads();
      for (int e = tid; e < CM * CM; e += kThreads) s.Pm[e / CM][e % CM] = s.N[e / CM][e % CM] * s.dinv[e % CM];
      __syncthreads();
      mm<CM, D, CM>(Ah, Pm, Y, -1.f, true);
      __syncthreads();
      if (shift != 0.f)
        for (int c = tid; c < D; c += kThreads) s.Ah[n - 1][c] = fmaf(shift, s.K[n - 1][c], s.Ah[n - 1][c]);
      __syncthreads();
      if (tid < CM) s.na[tid] = sqrtf(row_dot(s.Ah[tid], s.Ah[tid]));
      __syncthreads();
      for (int e = tid; e < CM * D; e += kThreads) s.Ah[e / D][e % D] = unit_entry(s.Ah[e / D][e % D], s.na[e / D]);  // line 20
      __syncthreads();
      mm<CM, CM, D>(LS, K, Ah.t(), 1.f, false, Tri::Strict);  // (V5) L_S = strict tril(K Alpha_hat^T)
      mm<CM, D, D>(E, K, Sc.t(), -1.f, true);                 // E = (I + L_S)^-1 (V - K S_c^T)
      mm<CM, CM, D>(M, Qf, Ah.t(), 1.f, false, Tri::Lower);   // M = tril(Q Alpha_hat^T)
      mm<CM, D, D>(dQf, Qf, Sc.t(), 1.f, false);              // O~ = Q S_c^T + M E (in dQf until (A1) has read it)
      __syncthreads();
      solve_lower<CM, D>(LS, E, 0);
      __syncthreads();
      mm<CM, D, CM>(dQf, M, E, 1.f, true);
      __syncthreads();

      // (A1) the read o_t = O~_t / den_t, den_t = max(phi(q_t) . z_t, eps): the floor has no gradient.
      if (tid < CM) {
        const float qz = row_dot(s.Qf[tid], s.Zt[tid]);
        const bool floored = qz < wa.eps;
        const float den = floored ? wa.eps : qz;
        s.den[tid] = den;
        s.dden[tid] = floored ? 0.f : -row_dot(s.dOn[tid], s.dQf[tid]) / (den * den);
      }
      __syncthreads();
      // What B2 and B3 read instead of this chunk's forward again.
      store_rows<CM, D>(st_out, &s.W[0][0], RD);
      store_rows<CM, D>(st_out + kStashY, &s.Y[0][0], RD);
      store_rows<CM, D>(st_out + kStashAh, &s.Ah[0][0], RD);
      store_rows<CM, D>(st_out + kStashE, &s.E[0][0], RD);
      store_rows<CM, CM>(st_out + kStashL, &s.L[0][0], RC);
      store_rows<CM, CM>(st_out + kStashN, &s.N[0][0], RC);
      store_rows<CM, CM>(st_out + kStashLS, &s.LS[0][0], RC);
      store_rows<CM, CM>(st_out + kStashM, &s.M[0][0], RC);
      store_rows<4, CM>(st_out + kStashVec, &s.dinv[0], CM);  // dinv, na, den, dden (adjacent in WalkSmem)
    } else {  // B1's forward of the chunk: all of it (B2), or (V1), (V2) (B3)
      load_rows<CM, D>(&s.W[0][0], RD, st_out);
      load_rows<CM, D>(&s.Y[0][0], RD, st_out + kStashY);
      load_rows<CM, CM>(&s.L[0][0], RC, st_out + kStashL);
      if constexpr (kWhole) {
        load_rows<CM, D>(&s.Ah[0][0], RD, st_out + kStashAh);
        load_rows<CM, D>(&s.E[0][0], RD, st_out + kStashE);
        load_rows<CM, CM>(&s.N[0][0], RC, st_out + kStashN);
        load_rows<CM, CM>(&s.LS[0][0], RC, st_out + kStashLS);
        load_rows<CM, CM>(&s.M[0][0], RC, st_out + kStashM);
        load_rows<4, CM>(&s.dinv[0], CM, st_out + kStashVec);
      } else {
        load_rows<1, CM>(&s.dinv[0], CM, st_out + kStashVec);
      }
      async_wait();
    }
    if constexpr (W == Walk::B3) {
      // The adjoint of the carried Sigma alone (dA = B2's + Sigma's, and only (A5) reads dA): (A5) with dA, then
      // (A6); du = line 10's adjoint of B2's U-bar plus this one.
      __syncthreads();
      mm<CM, D, D>(Zt, Y, dA, 1.f, false);  // Y (dA + dA^T) in Zt (the same thread owns an entry in both)
      mm<CM, D, D>(Zt, Y, dA.t(), 1.f, true);
      __syncthreads();
      if (tid < CM) s.ddinv[tid] = -0.5f * row_dot(s.Zt[tid], s.Y[tid]);
      for (int e = tid; e < CM * D; e += kThreads) s.dY[e / D][e % D] = -s.dinv[e / D] * s.Zt[e / D][e % D];
      __syncthreads();
      adjoint_factor();
      for (int e = tid; e < n * D; e += kThreads) s.Zt[e / D][e % D] += s.dOn[e / D][e % D];
      __syncthreads();
      if (tid < CM) s.rd[tid] = row_dot(s.U[tid], s.Zt[tid]) / u_scale;  // u_hat . U-bar
      __syncthreads();
      for (int e = tid; e < n * D; e += kThreads) {
        const int t = e / D, c = e % D;
        const float uh = s.U[t][c] / u_scale;
        g.du[base + static_cast<long long>(c0 + t) * D + c] =
            s.nu[t] == 0.f ? s.Zt[t][c] * u_scale : (s.Zt[t][c] - uh * s.rd[t]) / s.nu[t] * u_scale;
      }
      continue;
    }
    __syncthreads();
    for (int e = tid; e < CM * D; e += kThreads) {
      const int t = e / D, c = e % D;
      s.dOn[t][c] /= s.den[t];
      s.dQf[t][c] = s.dden[t] * s.Zt[t][c];
      s.Zt[t][c] = s.dden[t] * s.Qf[t][c];  // z_t-bar
    }
    if constexpr (W == Walk::B2)  // P = N D^-1 (V3)
      for (int e = tid; e < CM * CM; e += kThreads) s.Pm[e / CM][e % CM] = s.N[e / CM][e % CM] * s.dinv[e % CM];
    __syncthreads();
    if (tid >= kThreads - D) {  // phi(k_j)-bar = dz + sum_{t >= j} z_t-bar; z_c-bar likewise (the last warp)
      const int c = tid - (kThreads - D);
      float dz = s.dz[c];
#pragma unroll
      for (int t = CM - 1; t >= 0; --t) s.dKf[t][c] = dz += s.Zt[t][c];
      s.dz[c] = dz;
    }
    // (A2) E-bar = M^T dO~ + Alpha_hat dS^T (into F, solved in place in (A3)).
    mm<CM, D, CM>(F, M.t(), dOn, 1.f, false);
    mm<CM, D, D>(F, Ah, dS.t(), 1.f, true);
    if constexpr (W != Walk::B1) {
      mm<CM, D, D>(dQf, dOn, Sc, 1.f, true);                    // Q-bar += dO~ S_c
      mm<CM, CM, D>(T1, dOn, E.t(), 1.f, false, Tri::Lower);    // M-bar = tril(dO~ E^T)
      mm<CM, D, D>(dAh, E, dS, 1.f, false);                     // Alpha_hat-bar = E dS + M-bar^T Q
    }
    __syncthreads();
    mm<D, D, CM>(dS, dOn.t(), Qf, 1.f, true);  // S_c-bar = dS + dO~^T Q (after every read of dS above) ...
    if constexpr (W != Walk::B1) {
      mm<CM, D, CM>(dQf, T1, Ah, 1.f, true);     // Q-bar += M-bar Alpha_hat
      mm<CM, D, CM>(dAh, T1.t(), Qf, 1.f, true);
    }
    if constexpr (W == Walk::B1)  // X = (I + L_S)^-1 K for R_c (in dK), beside (A3)'s solve
      for (int e = tid; e < CM * D; e += kThreads) s.dK[e / D][e % D] = s.K[e / D][e % D];
    __syncthreads();
    // (A3) (I + L_S) E = V - K S_c^T: F = (I + L_S)^-T E-bar.
    solve_lower_t<CM, D>(LS, F, 0);
    if constexpr (W == Walk::B1) solve_lower<CM, D>(LS, dK, 32);
    __syncthreads();
    mm<D, D, CM>(dS, F.t(), K, -1.f, true);  // ... - F^T K
    if constexpr (W == Walk::B1) {
      // R_g <- R_g R_c, R_c = I - Alpha_hat^T X: R_g - (R_g Alpha_hat^T) X, R_g Alpha_hat^T (d x C) in dY's memory.
      const Wide PA{&s.dY[0][0]};
      mm<D, CM, D>(PA, P, Ah.t(), 1.f, false);
      __syncthreads();
      mm<D, D, CM>(P, PA, dK, -1.f, true);
      continue;
    }
    mm<CM, CM, D>(T2, F, E.t(), -1.f, false, Tri::Strict);  // L_S-bar = -strict tril(F E^T) (T2: T1 is still read)
    mm<CM, D, D>(dK, F, Sc, -1.f, false);                   // K-bar = -F S_c + L_S-bar Alpha_hat
    if constexpr (W == Walk::B2)
      for (int e = tid; e < n * D; e += kThreads) {
        const int t = e / D, c = e % D;
        g.dv[base + static_cast<long long>(c0 + t) * D + c] = s.F[t][c];  // V-bar = F
      }
    __syncthreads();
    mm<CM, D, CM>(dK, T2, Ah, 1.f, true);
    mm<CM, D, CM>(dAh, T2.t(), K, 1.f, true);  // Alpha_hat-bar += L_S-bar^T K
    __syncthreads();
    // (A4) line 20 row by row: Alpha-bar_t = (Alpha_hat-bar_t - alpha_hat_t (alpha_hat_t . Alpha_hat-bar_t)) /
    // ||alpha_t|| (in dAh), then Alpha = K A_c - P Y.
    if (tid < CM) s.rd[tid] = row_dot(s.Ah[tid], s.dAh[tid]);
    __syncthreads();
    for (int e = tid; e < CM * D; e += kThreads) {
      const int t = e / D, c = e % D;
      if (s.na[t] != 0.f) s.dAh[t][c] = (s.dAh[t][c] - s.Ah[t][c] * s.rd[t]) / s.na[t];
    }
    __syncthreads();
    mm<CM, D, D>(dK, dAh, Ac, 1.f, true);                     // K-bar += Alpha-bar A_c (+ shift Alpha-bar on the last row)
    mm<CM, CM, D>(T1, dAh, Y.t(), -1.f, false, Tri::Lower);   // P-bar = -tril(Alpha-bar Y^T)
    mm<CM, D, CM>(dY, Pm.t(), dAh, -1.f, false);              // Y-bar = -P^T Alpha-bar
    mm<CM, D, D>(Zt, Y, dA, 1.f, false);                      // Y (dA + dA^T) for (A5), in Zt's memory
    __syncthreads();
    if (shift != 0.f)
      for (int c = tid; c < D; c += kThreads) s.dK[n - 1][c] = fmaf(shift, s.dAh[n - 1][c], s.dK[n - 1][c]);
    // (D^-1)-bar_j = sum_t P-bar_tj N_tj, then N-bar = P-bar D^-1 in place, one thread per column.
    for (int j = tid; j < CM; j += kThreads) {
      float sd = 0.f;
#pragma unroll
      for (int t = 0; t < CM; ++t) sd = fmaf(s.T1[t][j], s.N[t][j], sd);
      s.ddinv[j] = sd;
#pragma unroll
      for (int t = 0; t < CM; ++t) s.T1[t][j] *= s.dinv[j];
    }
    mm<CM, D, D>(Zt, Y, dA.t(), 1.f, true);
    __syncthreads();
    mm<CM, D, CM>(dK, T1, Y, 1.f, true);      // K-bar += N-bar Y
    mm<CM, D, CM>(dY, T1.t(), K, 1.f, true);  // Y-bar += N-bar^T K
    __syncthreads();
    // (A5) A' = A_c - Y^T D^-1 Y: Y-bar -= D^-1 Y (dA + dA^T), (D^-1)-bar_j -= y_j^T dA y_j (= half of
    // y_j . (Y (dA + dA^T))_j).
    if (tid < CM) s.ddinv[tid] -= 0.5f * row_dot(s.Zt[tid], s.Y[tid]);
    for (int e = tid; e < CM * D; e += kThreads) {
      const int t = e / D, c = e % D;
      s.dY[t][c] = fmaf(-s.dinv[t], s.Zt[t][c], s.dY[t][c]);
    }
    __syncthreads();
    mm<D, D, CM>(dA, K.t(), dAh, 1.f, true);  // A_c-bar = dA + K^T Alpha-bar (after (A5)'s reads of dA) ...
    adjoint_factor();
    if constexpr (W == Walk::B2) {
      // (A7) the rows of dq and dk (final: Sigma_b reaches only du, through (A5)), and U-bar so far into du's rows
      // (B3 adds the carried Sigma's part and applies line 10's adjoint).
      if (tid < CM) s.rd[tid] = row_dot(s.K[tid], s.dK[tid]);  // k_hat . K-bar
      __syncthreads();
      for (int e = tid; e < n * D; e += kThreads) {
        const int t = e / D, c = e % D;
        const long long at = base + static_cast<long long>(c0 + t) * D + c;
        const float dkf = s.dKf[t][c] + (s.nk[t] == 0.f ? s.dK[t][c] : (s.dK[t][c] - s.K[t][c] * s.rd[t]) / s.nk[t]);
        // phi'(x) = min(phi(x), 1) exactly: 1 where x > 0 (phi = x + 1 >= 1), exp(x) = phi(x) elsewhere.
        g.dk[at] = dkf * fminf(s.Kf[t][c], 1.f);
        g.dq[at] = s.dQf[t][c] * fminf(s.Qf[t][c], 1.f);
        g.du[at] = s.Zt[t][c];
      }
    }
  }
  __syncthreads();
  // What the chains read: B1 dS^0_a, dz^0_a, R_g; B2 sym(dA^0_a), Phi_g.
  float* local = wa.ga.local + slot * kCarry;
  float* prod = wa.ga.product + slot * D * D;
  if constexpr (W == Walk::B1) {
    for (int e = tid; e < D * D; e += kThreads) {
      local[e] = s.dS[e / D][e % D];
      prod[e] = s.P[e / D][e % D];
    }
    for (int c = tid; c < D; c += kThreads) local[2 * D * D + c] = s.dz[c];
  } else if constexpr (W == Walk::B2) {
    for (int e = tid; e < D * D; e += kThreads) {
      const int r = e / D, c = e % D;
      local[D * D + e] = 0.5f * (s.dA[r][c] + s.dA[c][r]);
      prod[e] = s.P[r][c];
    }
  }
}


template <int CM, Walk W> cudaError_t launch_walk(const RecurrentTensors& x, const RecurrentGrads& g, const WalkArgs& wa, cudaStream_t st) {
  constexpr int bytes = static_cast<int>(sizeof(WalkSmem<CM>));
  const cudaError_t a = cudaFuncSetAttribute(walk_kernel<CM, W>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (a != cudaSuccess) return a;
  walk_kernel<CM, W><<<static_cast<unsigned>(x.B * x.H * wa.ga.groups), kThreads, bytes, st>>>(x, g, wa);
  return cudaGetLastError();
}

// B1, C1, B2, C2, B3 in stream order (each reads what the one before wrote).
template <int CM> cudaError_t run_walks(const RecurrentTensors& x, const RecurrentGrads& g, const WalkArgs& wa, cudaStream_t st) {
  const unsigned seqs = static_cast<unsigned>(x.B * x.H);
  cudaError_t e;
  if ((e = launch_walk<CM, Walk::B1>(x, g, wa, st)) != cudaSuccess) return e;
  vla_group_chain_kernel<D, 1><<<seqs, kChainThreads, 0, st>>>(wa.ga);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  if ((e = launch_walk<CM, Walk::B2>(x, g, wa, st)) != cudaSuccess) return e;
  vla_group_chain_kernel<D, 2><<<seqs, kChainThreads, 0, st>>>(wa.ga);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  return launch_walk<CM, Walk::B3>(x, g, wa, st);
}

// The unit a group counts: a refresh segment, or a chunk without the refresh.
int segment_tokens(int chunk, const RecurrentParams& p) { return p.refresh_period > 0 ? p.refresh_period : chunked_vla_chunk(chunk, p); }

// Walk blocks resident at once on the current device (an occupancy query; an H100's 132 SMs x 2 where it fails).
long long resident_walk_blocks(int C) {
  int dev = 0, sms = 0, per_sm = 0;
  const auto query = [&](auto kernel, int bytes) {
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) == cudaSuccess &&
           cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, bytes) == cudaSuccess;
  };
  bool ok = cudaGetDevice(&dev) == cudaSuccess && cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess;
  ok = ok && (C <= 16 ? query(walk_kernel<16, Walk::B3>, int(sizeof(WalkSmem<16>)))
              : C <= 20 ? query(walk_kernel<20, Walk::B3>, int(sizeof(WalkSmem<20>)))
                        : query(walk_kernel<32, Walk::B3>, int(sizeof(WalkSmem<32>))));
  if (!ok || sms < 1 || per_sm < 1) {
    cudaGetLastError();  // leave no error behind for the caller's next check
    return 132 * 2;
  }
  return static_cast<long long>(sms) * per_sm;
}

}  // namespace

int chunked_vla_backward_group_tokens(int chunk, const RecurrentParams& p, int B, int H, int T) {
  const int unit = segment_tokens(chunk, p);
  if (B < 1 || H < 1 || T < 1 || chunk < 0 || chunk > kChunkedVlaMaxChunk) return unit;
  const long long seqs = static_cast<long long>(B) * H, units = (T + unit - 1) / unit;
  const long long groups = std::max(1LL, resident_walk_blocks(chunked_vla_chunk(chunk, p)) / seqs);  // per sequence
  return static_cast<int>(std::max(1LL, (units + groups - 1) / groups)) * unit;
}

std::size_t chunked_vla_backward_workspace_floats(int chunk, const RecurrentParams& p, int B, int H, int T, int group_tokens) {
  if (B < 1 || H < 1 || T < 1 || group_tokens < 0) return 0;
  if (group_tokens == 0) group_tokens = chunked_vla_backward_group_tokens(chunk, p, B, H, T);
  const long long groups = (T + group_tokens - 1) / group_tokens, seqs = static_cast<long long>(B) * H;
  const int C = chunked_vla_chunk(chunk, p);
  const long long chunks = chunk_of(T - 1, C, p.refresh_period) + 1;
  return std::size_t(seqs * groups * (5LL * D * D + 2 * D) + seqs * chunks * stash_floats(compiled_rows(C)));
}

cudaError_t chunked_vla_backward(const RecurrentTensors& x, const RecurrentGrads& g, const RecurrentParams& p, int chunk,
                                 int group_tokens, const float* chunk_starts, float* workspace, cudaStream_t stream) {
  if (x.B < 1 || x.H < 1 || x.T < 1 || x.d != D || !x.q || !x.k || !x.v || !x.u) return cudaErrorInvalidValue;
  if (!g.dout || !g.dq || !g.dk || !g.dv || !g.du || !chunk_starts || !workspace) return cudaErrorInvalidValue;
  if (chunk < 0 || chunk > kChunkedVlaMaxChunk || group_tokens < 0 || !p.normalise_key || !(p.eps <= 1.f)) return cudaErrorInvalidValue;
  if (group_tokens == 0) group_tokens = chunked_vla_backward_group_tokens(chunk, p, x.B, x.H, x.T);
  if (group_tokens % segment_tokens(chunk, p) != 0) return cudaErrorInvalidValue;  // groups of whole chunks
  WalkArgs wa{};
  wa.T = x.T;
  wa.C = chunked_vla_chunk(chunk, p);
  wa.period = p.refresh_period;
  wa.group_tokens = group_tokens;
  wa.chunks = chunk_of(x.T - 1, wa.C, wa.period) + 1;
  wa.eps = p.eps;
  wa.eta = p.refresh_eta;
  wa.starts = chunk_starts;
  wa.ga.groups = (x.T + group_tokens - 1) / group_tokens;
  const long long slots = static_cast<long long>(x.B) * x.H * wa.ga.groups, carry = 2LL * D * D + D;
  if (slots > 0x7fffffffLL) return cudaErrorInvalidValue;
  wa.ga.local = workspace;
  wa.ga.carry = workspace + slots * carry;
  wa.ga.product = wa.ga.carry + slots * carry;
  wa.stash = wa.ga.product + slots * D * D;
  switch (compiled_rows(wa.C)) {
    case 16: return run_walks<16>(x, g, wa, stream);
    case 20: return run_walks<20>(x, g, wa, stream);
    default: return run_walks<32>(x, g, wa, stream);
  }
}

}  // namespace vla::gpu
