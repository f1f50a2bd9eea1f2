// The chunk-form VLA backward on the GPU; contract in gpu/chunked_vla_backward.hpp. Each step is an equation
// of docs/chunkwise-vla.md ((V1)-(V5) for a chunk's forward again, (A1)-(A7) for its adjoint), in the order
// of the CPU reference core/rules/vla/chunkwise_adjoint.hpp (vla_chunk_adjoint), which a reader can hold
// line by line against walk_kernel below.
//
// Parallel structure. A sequence is cut into groups of whole refresh segments; one block of kThreads threads
// walks one (sequence, group), its chunks from the last, and the chains between the walks (C1, C2 of "The
// backward across groups") are the token-walk backward's own (gpu/group_chain.cuh):
//   B1  from the zero carry: the dS and dz parts of each chunk's adjoint and R_g <- R_g R_c, with
//       R_c = I - Alpha_hat^T (I + L_S)^-1 K (dS_start = dS_end R_c + the chunk's own terms)
//   C1  the true (dS, dz) at every group's end
//   B2  from (dS_b, dz_b, 0): the whole adjoint, leaving sym(dA^0_a), and Phi_g <- Phi_g Phi_c with
//       Phi_c = I - Y^T D^-1 L^-1 U (= F_n ... F_1 of the token adjoint: A' = Phi_c A_c before the refresh)
//   C2  the true Sigma = sym(dA) at every group's end
//   B3  from (dS_b, dz_b, Sigma_b): the whole adjoint, writing the chunk's rows of dq, dk, dv, du
// A chunk's matrices live in shared memory (row stride d + 1 or C + 1: a row walk and a column walk both hit
// 32 banks); each step is a block-wide loop over the entries of its result (mm: one entry per thread per
// pass) or, for the triangular solves and the L D L^T, over the columns, ending with a barrier. Every
// product is fp32 FMA (no tensor cores yet), so this is the matrix form's first GPU version: correct and
// race-free first, its cost measured against the token walks (docs/chunkwise-vla.md, "GPU backward").
#include "gpu/chunked_vla_backward.hpp"

#include "core/phi.hpp"
#include "gpu/group_chain.cuh"

#include <algorithm>

namespace vla::gpu {
namespace {

using group_chain::GroupArgs;
using group_chain::kChainThreads;
using group_chain::vla_group_chain_kernel;

constexpr int D = 32;         // head width
constexpr int RD = D + 1;     // row stride of the C x d and d x d matrices
constexpr int kThreads = 256; // threads per walk block

// A view of a shared matrix: entry (i, j) at p[i rs + j cs]; t() is the transpose, the same memory.
struct Mv {
  float* p;
  int rs, cs;
  __device__ float& operator()(int i, int j) const { return p[i * rs + j * cs]; }
  __device__ Mv t() const { return {p, cs, rs}; }
};

// Which entries of a product are kept: all, j <= i (tril), or j < i (strict tril); the others are set to 0.
enum class Tri { Full, Lower, Strict };
__device__ __forceinline__ bool kept(Tri t, int i, int j) { return t == Tri::Full || (t == Tri::Lower ? j <= i : j < i); }

// Y = alpha A B (m x n, k terms), or Y += alpha A B with acc; entries outside `tri` set to zero (acc: left
// as they are). Y must not alias A or B. Ends with a barrier, as every step below.
__device__ void mm(Mv Y, int m, int n, int k, Mv A, Mv B, float alpha, bool acc, Tri tri = Tri::Full) {
  for (int e = threadIdx.x; e < m * n; e += kThreads) {
    const int i = e / n, j = e % n;
    if (!kept(tri, i, j)) {
      if (!acc) Y(i, j) = 0.f;
      continue;
    }
    float s0 = 0.f, s1 = 0.f;  // two chains: half the dependent FMA latency
    int c = 0;
    for (; c + 1 < k; c += 2) {
      s0 = fmaf(A(i, c), B(c, j), s0);
      s1 = fmaf(A(i, c + 1), B(c + 1, j), s1);
    }
    if (c < k) s0 = fmaf(A(i, c), B(c, j), s0);
    const float v = alpha * (s0 + s1);
    Y(i, j) = acc ? Y(i, j) + v : v;
  }
  __syncthreads();
}

// X <- L^-1 X and X <- L^-T X for a unit lower triangular L (n x n; only its strict lower part read) and
// X n x m, in place, one thread per column of X.
__device__ void solve_lower(Mv L, Mv X, int n, int m) {
  for (int j = threadIdx.x; j < m; j += kThreads)
    for (int i = 1; i < n; ++i) {
      float s = X(i, j);
      for (int c = 0; c < i; ++c) s = fmaf(-L(i, c), X(c, j), s);
      X(i, j) = s;
    }
  __syncthreads();
}
__device__ void solve_lower_t(Mv L, Mv X, int n, int m) {
  for (int j = threadIdx.x; j < m; j += kThreads)
    for (int i = n - 2; i >= 0; --i) {
      float s = X(i, j);
      for (int c = i + 1; c < n; ++c) s = fmaf(-L(c, i), X(c, j), s);
      X(i, j) = s;
    }
  __syncthreads();
}

// (V1): G = L D L^T, unpivoted, right-looking, by the first warp (lane i = row i): after pivot j every row
// i > j subtracts L_ij G_kj from its entries k in (j, i]. G (its lower part, overwritten) -> L (unit lower,
// zero above: products read it whole) and dinv = D^-1. The pivots are Alg. 1's delta_t, clamped at eps as
// line 13 (which cannot fire for eps <= 1 while A is SPD).
__device__ void ldl(Mv G, Mv L, float* dinv, int n, float eps) {
  const int i = threadIdx.x;
  if (i < 32) {
    if (i < n)
      for (int k = 0; k < n; ++k) L(i, k) = k == i ? 1.f : 0.f;
    for (int j = 0; j < n; ++j) {
      float djj = G(j, j);
      djj = djj >= eps ? djj : eps;
      const float inv = 1.f / djj;
      if (i == j) dinv[j] = inv;
      if (i > j && i < n) {
        const float lij = G(i, j) * inv;
        for (int k = j + 1; k <= i; ++k) G(i, k) = fmaf(-lij, G(k, j), G(i, k));
        L(i, j) = lij;
      }
      __syncwarp();
    }
  }
  __syncthreads();
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

enum class Walk { B1, B2, B3 };

// A chunk's matrices (CM >= its rows). About 76 KB at CM = 20, 112 KB at CM = 32.
template <int CM> struct alignas(16) WalkSmem {
  float Ac[D][RD], Sc[D][RD];  // the state before the chunk (A symmetrised)
  float dS[D][RD], dA[D][RD];  // the carry: at the chunk's end on entry, at its start on exit
  float P[D][RD];              // R_g (B1) or Phi_g (B2), the chunk maps' product so far
  // C x d: the chunk's rows
  float Qf[CM][RD], Kf[CM][RD], K[CM][RD], U[CM][RD];  // phi(q), phi(k), k_hat, u (lines 8-10)
  float W[CM][RD], Y[CM][RD], Ah[CM][RD], E[CM][RD];   // (V1) W = U A_c, (V2) Y, line 20's alpha_hat, (V5) E
  float Zt[CM][RD];                                    // z_t (line 24), then dz_t, then scratch
  float dOn[CM][RD], dQf[CM][RD], dKf[CM][RD], F[CM][RD], dAh[CM][RD], dK[CM][RD], dY[CM][RD];
  // C x C
  float L[CM][CM + 1], N[CM][CM + 1], Pm[CM][CM + 1], LS[CM][CM + 1], M[CM][CM + 1], T1[CM][CM + 1], T2[CM][CM + 1];
  float dinv[CM], den[CM], dden[CM], na[CM], nk[CM], nu[CM], ddinv[CM], rd[CM];
  float dz[D];
};

struct WalkArgs {
  GroupArgs ga;
  const float* starts;  // chunk_starts
  int T, C, period, group_tokens, chunks;
  float eps, eta;
};

template <int CM, Walk W>
__global__ void __launch_bounds__(kThreads) walk_kernel(const RecurrentTensors x, const RecurrentGrads g, const WalkArgs wa) {
  extern __shared__ __align__(16) unsigned char smem[];
  using Smem = WalkSmem<CM>;
  Smem& s = *reinterpret_cast<Smem*>(smem);
  constexpr int RC = CM + 1;
  const int tid = threadIdx.x;
  const int seq = blockIdx.x / wa.ga.groups, grp = blockIdx.x % wa.ga.groups;
  const long long slot = static_cast<long long>(seq) * wa.ga.groups + grp;
  constexpr long long kCarry = 2LL * D * D + D;
  const long long base = static_cast<long long>(seq) * wa.T * D;
  const float u_scale = 1.f / sqrtf(static_cast<float>(D));
  const auto cxd = [](float (&m)[CM][RD]) { return Mv{&m[0][0], RD, 1}; };
  const auto cxc = [](float (&m)[CM][RC]) { return Mv{&m[0][0], RC, 1}; };
  const auto dxd = [](float (&m)[D][RD]) { return Mv{&m[0][0], RD, 1}; };
  const Mv Ac = dxd(s.Ac), Sc = dxd(s.Sc), dS = dxd(s.dS), dA = dxd(s.dA), P = dxd(s.P);
  const Mv Qf = cxd(s.Qf), Kf = cxd(s.Kf), K = cxd(s.K), U = cxd(s.U), Wm = cxd(s.W), Y = cxd(s.Y), Ah = cxd(s.Ah), E = cxd(s.E);
  const Mv Zt = cxd(s.Zt), dOn = cxd(s.dOn), dQf = cxd(s.dQf), dKf = cxd(s.dKf), F = cxd(s.F), dAh = cxd(s.dAh), dK = cxd(s.dK),
           dY = cxd(s.dY);
  const Mv L = cxc(s.L), N = cxc(s.N), Pm = cxc(s.Pm), LS = cxc(s.LS), M = cxc(s.M), T1 = cxc(s.T1), T2 = cxc(s.T2);

  // The carry at the group's end: zero (B1), the chains' (dS_b, dz_b) and, in B3, Sigma_b; the product from I.
  const float* carry = wa.ga.carry + slot * kCarry;
  for (int e = tid; e < D * D; e += kThreads) {
    const int r = e / D, c = e % D;
    s.dS[r][c] = W == Walk::B1 ? 0.f : carry[e];
    s.dA[r][c] = W == Walk::B3 ? carry[D * D + e] : 0.f;
    s.P[r][c] = r == c ? 1.f : 0.f;
  }
  for (int c = tid; c < D; c += kThreads) s.dz[c] = W == Walk::B1 ? 0.f : carry[2 * D * D + c];

  const int t0 = grp * wa.group_tokens, t1 = min(wa.T, t0 + wa.group_tokens);
  const int i_first = chunk_of(t0, wa.C, wa.period), i_last = chunk_of(t1 - 1, wa.C, wa.period);
  for (int ci = i_last; ci >= i_first; --ci) {
    const int c0 = chunk_start(ci, wa.C, wa.period), n = chunk_length(c0, wa.T, wa.C, wa.period);
    const float shift = wa.period > 0 && (c0 + n) % wa.period == 0 ? wa.eta : 0.f;
    __syncthreads();  // the previous chunk's readers are done with every buffer
    // The state before the chunk, A symmetrised (the forward's products leave it symmetric up to rounding).
    const float* st = wa.starts + (static_cast<long long>(seq) * wa.chunks + ci) * backward_slot_floats(D);
    for (int e = tid; e < D * D; e += kThreads) {
      const int r = e / D, c = e % D;
      s.Sc[r][c] = st[e];
      s.Ac[r][c] = 0.5f * (st[D * D + e] + st[D * D + c * D + r]);
    }
    // Lines 8-10's inputs; V into E (the residuals are computed in place), dO into dOn.
    for (int e = tid; e < n * D; e += kThreads) {
      const int t = e / D, c = e % D;
      const long long at = base + static_cast<long long>(c0 + t) * D + c;
      s.Qf[t][c] = elu_plus_one(x.q[at]);
      s.Kf[t][c] = elu_plus_one(x.k[at]);
      s.U[t][c] = x.u[at];
      s.E[t][c] = x.v[at];
      s.dOn[t][c] = g.dout[at];
    }
    __syncthreads();
    if (tid < n) {
      s.nk[tid] = sqrtf(row_dot(s.Kf[tid], s.Kf[tid]));
      s.nu[tid] = sqrtf(row_dot(s.U[tid], s.U[tid]));
    }
    __syncthreads();
    for (int e = tid; e < n * D; e += kThreads) {
      const int t = e / D, c = e % D;
      s.K[t][c] = s.Kf[t][c] / s.nk[t];            // line 9
      s.U[t][c] = s.U[t][c] / s.nu[t] * u_scale;  // line 10
    }
    for (int c = tid; c < D; c += kThreads) {  // line 24: z_t = z_c + sum_{j <= t} phi(k_j)
      float z = st[2 * D * D + c];
      for (int t = 0; t < n; ++t) s.Zt[t][c] = z += s.Kf[t][c];
    }
    __syncthreads();

    // The chunk's forward again, (V1)-(V5).
    mm(Wm, n, D, D, U, Ac, 1.f, false);          // (V1) W = U A_c
    mm(T1, n, n, D, U, Wm.t(), 1.f, false, Tri::Lower);  // G = I + U W^T (its lower part)
    if (tid < n) s.T1[tid][tid] += 1.f;
    __syncthreads();
    ldl(T1, L, s.dinv, n, wa.eps);                // G = L D L^T
    for (int e = tid; e < n * D; e += kThreads) s.Y[e / D][e % D] = s.W[e / D][e % D];
    __syncthreads();
    solve_lower(L, Y, n, D);                      // (V2) Y = L^-1 W: rows y_t = A_{t-1} u_t
    mm(N, n, n, D, K, Y.t(), 1.f, false, Tri::Lower);  // (V3) N = tril(K Y^T), P = N D^-1
    for (int e = tid; e < n * n; e += kThreads) s.Pm[e / n][e % n] = s.N[e / n][e % n] * s.dinv[e % n];
    __syncthreads();
    mm(Ah, n, D, D, K, Ac, 1.f, false);           // Alpha = K A_c - P Y (+ shift k_hat on the last row)
    mm(Ah, n, D, n, Pm, Y, -1.f, true);
    if (shift != 0.f)
      for (int c = tid; c < D; c += kThreads) s.Ah[n - 1][c] = fmaf(shift, s.K[n - 1][c], s.Ah[n - 1][c]);
    __syncthreads();
    if (tid < n) s.na[tid] = sqrtf(row_dot(s.Ah[tid], s.Ah[tid]));
    __syncthreads();
    for (int e = tid; e < n * D; e += kThreads) s.Ah[e / D][e % D] /= s.na[e / D];  // line 20
    __syncthreads();
    mm(LS, n, n, D, K, Ah.t(), 1.f, false, Tri::Strict);  // (V5) L_S = strict tril(K Alpha_hat^T)
    mm(E, n, D, D, K, Sc.t(), -1.f, true);                // E = (I + L_S)^-1 (V - K S_c^T)
    solve_lower(LS, E, n, D);
    mm(M, n, n, D, Qf, Ah.t(), 1.f, false, Tri::Lower);   // M = tril(Q Alpha_hat^T)
    mm(dQf, n, D, D, Qf, Sc.t(), 1.f, false);             // O~ = Q S_c^T + M E (in dQf until (A1) has read it)
    mm(dQf, n, D, n, M, E, 1.f, true);

    // (A1) the read o_t = O~_t / den_t, den_t = max(phi(q_t) . z_t, eps): the floor has no gradient.
    if (tid < n) {
      const float qz = row_dot(s.Qf[tid], s.Zt[tid]);
      const bool floored = qz < wa.eps;
      const float den = floored ? wa.eps : qz;
      s.den[tid] = den;
      s.dden[tid] = floored ? 0.f : -row_dot(s.dOn[tid], s.dQf[tid]) / (den * den);
    }
    __syncthreads();
    for (int e = tid; e < n * D; e += kThreads) {
      const int t = e / D, c = e % D;
      s.dOn[t][c] /= s.den[t];
      s.dQf[t][c] = s.dden[t] * s.Zt[t][c];
      s.Zt[t][c] = s.dden[t] * s.Qf[t][c];  // z_t-bar
    }
    __syncthreads();
    for (int c = tid; c < D; c += kThreads) {  // phi(k_j)-bar = dz + sum_{t >= j} z_t-bar; z_c-bar likewise
      float dz = s.dz[c];
      for (int t = n - 1; t >= 0; --t) s.dKf[t][c] = dz += s.Zt[t][c];
      s.dz[c] = dz;
    }
    // (A2) E-bar = M^T dO~ + Alpha_hat dS^T (into F, solved in place in (A3)).
    mm(F, n, D, n, M.t(), dOn, 1.f, false);
    mm(F, n, D, D, Ah, dS.t(), 1.f, true);
    if constexpr (W != Walk::B1) {
      mm(dQf, n, D, D, dOn, Sc, 1.f, true);                 // Q-bar += dO~ S_c
      mm(T1, n, n, D, dOn, E.t(), 1.f, false, Tri::Lower);  // M-bar = tril(dO~ E^T)
      mm(dQf, n, D, n, T1, Ah, 1.f, true);                  // Q-bar += M-bar Alpha_hat
      mm(dAh, n, D, n, T1.t(), Qf, 1.f, false);             // Alpha_hat-bar = M-bar^T Q + E dS
      mm(dAh, n, D, D, E, dS, 1.f, true);
    }
    mm(dS, D, D, n, dOn.t(), Qf, 1.f, true);  // S_c-bar = dS + dO~^T Q (after every read of dS above) ...
    // (A3) (I + L_S) E = V - K S_c^T: F = (I + L_S)^-T E-bar.
    solve_lower_t(LS, F, n, D);
    mm(dS, D, D, n, F.t(), K, -1.f, true);    // ... - F^T K
    if constexpr (W == Walk::B1) {
      // R_g <- R_g R_c, R_c = I - Alpha_hat^T X with X = (I + L_S)^-1 K (into dK): R_g - (R_g Alpha_hat^T) X,
      // R_g Alpha_hat^T (d x n) in dY's memory.
      for (int e = tid; e < n * D; e += kThreads) s.dK[e / D][e % D] = s.K[e / D][e % D];
      __syncthreads();
      solve_lower(LS, dK, n, D);
      const Mv PA{&s.dY[0][0], CM, 1};
      mm(PA, D, n, D, P, Ah.t(), 1.f, false);
      mm(P, D, D, n, PA, dK, -1.f, true);
      continue;
    }
    mm(T1, n, n, D, F, E.t(), -1.f, false, Tri::Strict);  // L_S-bar = -strict tril(F E^T)
    mm(dK, n, D, n, T1, Ah, 1.f, false);                  // K-bar = L_S-bar Alpha_hat - F S_c
    mm(dK, n, D, D, F, Sc, -1.f, true);
    mm(dAh, n, D, n, T1.t(), K, 1.f, true);               // Alpha_hat-bar += L_S-bar^T K
    if constexpr (W == Walk::B3)
      for (int e = tid; e < n * D; e += kThreads) {
        const int t = e / D, c = e % D;
        g.dv[base + static_cast<long long>(c0 + t) * D + c] = s.F[t][c];  // V-bar = F
      }
    // (A4) line 20 row by row: Alpha-bar_t = (Alpha_hat-bar_t - alpha_hat_t (alpha_hat_t . Alpha_hat-bar_t)) / ||alpha_t||
    // (in dAh), then Alpha = K A_c - P Y.
    if (tid < n) s.rd[tid] = row_dot(s.Ah[tid], s.dAh[tid]);
    __syncthreads();
    for (int e = tid; e < n * D; e += kThreads) {
      const int t = e / D, c = e % D;
      if (s.na[t] != 0.f) s.dAh[t][c] = (s.dAh[t][c] - s.Ah[t][c] * s.rd[t]) / s.na[t];
    }
    __syncthreads();
    mm(dK, n, D, D, dAh, Ac, 1.f, true);  // K-bar += Alpha-bar A_c (+ shift Alpha-bar on the last row)
    if (shift != 0.f)
      for (int c = tid; c < D; c += kThreads) s.dK[n - 1][c] = fmaf(shift, s.dAh[n - 1][c], s.dK[n - 1][c]);
    mm(T2, n, n, D, dAh, Y.t(), -1.f, false, Tri::Lower);  // P-bar = -tril(Alpha-bar Y^T)
    mm(dY, n, D, n, Pm.t(), dAh, -1.f, false);             // Y-bar = -P^T Alpha-bar
    // (D^-1)-bar_j = sum_t P-bar_tj N_tj, then N-bar = P-bar D^-1 in place, one thread per column.
    for (int j = tid; j < n; j += kThreads) {
      float sd = 0.f;
      for (int t = 0; t < n; ++t) sd = fmaf(s.T2[t][j], s.N[t][j], sd);
      s.ddinv[j] = sd;
      for (int t = 0; t < n; ++t) s.T2[t][j] *= s.dinv[j];
    }
    __syncthreads();
    mm(dK, n, D, n, T2, Y, 1.f, true);        // K-bar += N-bar Y
    mm(dY, n, D, n, T2.t(), K, 1.f, true);    // Y-bar += N-bar^T K
    // (A5) A' = A_c - Y^T D^-1 Y: Y-bar -= D^-1 Y (dA + dA^T), (D^-1)-bar_j -= y_j^T dA y_j (= half of
    // y_j . (Y (dA + dA^T))_j), with Y (dA + dA^T) in Zt's memory.
    mm(Zt, n, D, D, Y, dA, 1.f, false);
    mm(Zt, n, D, D, Y, dA.t(), 1.f, true);
    if (tid < n) {
      s.ddinv[tid] -= 0.5f * row_dot(s.Zt[tid], s.Y[tid]);
      for (int c = 0; c < D; ++c) s.dY[tid][c] = fmaf(-s.dinv[tid], s.Zt[tid][c], s.dY[tid][c]);
    }
    __syncthreads();
    mm(dA, D, D, n, K.t(), dAh, 1.f, true);  // A_c-bar = dA + K^T Alpha-bar (after (A5)'s reads of dA) ...
    if constexpr (W == Walk::B2) {
      // Phi_g <- Phi_g Phi_c, Phi_c = I - Y^T D^-1 (L^-1 U): Phi_g - (Phi_g Y^T D^-1) (L^-1 U), L^-1 U in F's
      // memory (F is spent), Phi_g Y^T D^-1 (d x n) in Qf's (so is Q).
      for (int e = tid; e < n * D; e += kThreads) s.F[e / D][e % D] = s.U[e / D][e % D];
      __syncthreads();
      solve_lower(L, F, n, D);
      const Mv PY{&s.Qf[0][0], CM, 1};
      mm(PY, D, n, D, P, Y.t(), 1.f, false);
      for (int e = tid; e < D * n; e += kThreads) PY(e / n, e % n) *= s.dinv[e % n];
      __syncthreads();
      mm(P, D, D, n, PY, F, -1.f, true);
    }
    // (A6) Y = L^-1 W: W-bar = L^-T Y-bar (in dY), L-bar = -strict tril(W-bar Y^T) (T1).
    solve_lower_t(L, dY, n, D);
    mm(T1, n, n, D, dY, Y.t(), -1.f, false, Tri::Strict);
    // Z = strict tril(L^T L-bar D^-1) + diag(D-bar), D-bar = -(D^-1)-bar D^-2 (T2).
    mm(T2, n, n, n, L.t(), T1, 1.f, false, Tri::Strict);
    for (int e = tid; e < n * n; e += kThreads) {
      const int i = e / n, j = e % n;
      if (i == j) s.T2[i][j] = -s.ddinv[j] * s.dinv[j] * s.dinv[j];
      else s.T2[i][j] *= s.dinv[j];
    }
    __syncthreads();
    // G-bar = L^-T Z L^-1: X = L^-T (L^-T Z)^T, G-bar = X^T; only sym(G-bar) reaches anything (G is symmetric).
    solve_lower_t(L, T2, n, n);
    for (int e = tid; e < n * n; e += kThreads) s.T1[e / n][e % n] = s.T2[e % n][e / n];
    __syncthreads();
    solve_lower_t(L, T1, n, n);
    for (int e = tid; e < n * n; e += kThreads) {
      const int i = e / n, j = e % n;
      s.T2[i][j] = 0.5f * (s.T1[i][j] + s.T1[j][i]);  // sym(G-bar)
    }
    __syncthreads();
    // G = I + U A_c U^T, W = U A_c: U-bar = 2 sym(G-bar) W + W-bar A_c (in Zt), A_c-bar += U^T (sym(G-bar) U + W-bar).
    mm(Zt, n, D, n, T2, Wm, 2.f, false);
    mm(Zt, n, D, D, dY, Ac, 1.f, true);
    mm(dY, n, D, n, T2, U, 1.f, true);
    mm(dA, D, D, n, U.t(), dY, 1.f, true);
    if constexpr (W == Walk::B3) {
      // (A7) the rows: lines 8-10's adjoints (unit' of k_hat and u, phi' of q and k).
      if (tid < n) {
        s.rd[tid] = row_dot(s.U[tid], s.Zt[tid]) / u_scale;  // u_hat . U-bar
        s.ddinv[tid] = row_dot(s.K[tid], s.dK[tid]);        // k_hat . K-bar
      }
      __syncthreads();
      for (int e = tid; e < n * D; e += kThreads) {
        const int t = e / D, c = e % D;
        const long long at = base + static_cast<long long>(c0 + t) * D + c;
        const float uh = s.U[t][c] / u_scale;
        g.du[at] = s.nu[t] == 0.f ? s.Zt[t][c] * u_scale : (s.Zt[t][c] - uh * s.rd[t]) / s.nu[t] * u_scale;
        const float dkf = s.dKf[t][c] + (s.nk[t] == 0.f ? s.dK[t][c] : (s.dK[t][c] - s.K[t][c] * s.ddinv[t]) / s.nk[t]);
        g.dk[at] = dkf * elu_plus_one_grad(x.k[at]);
        g.dq[at] = s.dQf[t][c] * elu_plus_one_grad(x.q[at]);
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
  const long long groups = (T + group_tokens - 1) / group_tokens;
  return std::size_t(static_cast<long long>(B) * H * groups * (5LL * D * D + 2 * D));
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
  return wa.C <= 16 ? run_walks<16>(x, g, wa, stream) : wa.C <= 20 ? run_walks<20>(x, g, wa, stream) : run_walks<32>(x, g, wa, stream);
}

}  // namespace vla::gpu
