// Fused fp32 backward of the VLA recurrence; contract in gpu/recurrent_backward.hpp, adjoint equations
// (derived line by line from Algorithm 1) in core/rules/vla/adjoint.hpp, the CPU reference core/model/head.hpp.
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
//    The re-run also leaves each step's quantities that cost walks and block sums (z, alpha_hat, e and
//    four norms; Slots::values), so the reverse step reads them rather than computing them again from
//    the same state: the same bits, three block sums and a three-vector walk fewer per reverse step.
//    `two_passes` below is this schedule, once for the three rules; each rule gives it a forward step
//    and a reverse step. Where the forward kernel has just run over the same inputs, it can write the
//    checkpoints itself (x.checkpoints, gpu/recurrent_forward.hpp) and the first forward pass is skipped.
//
// Parallel structure. One block per (b, h), d threads; thread j owns element j of every per-token
// vector and column j of S, A, dS, dA for rank-1 updates (M += a b^T touches M[:, j] only in thread j,
// so updates need no atomics). S, dS, dA live in shared memory with row stride d+1, so that both a row
// walk (thread j reads M[j][c], mat-vec M x) and a column walk (M[c][j], M^T x) hit 32 distinct banks.
// A is kept bitwise symmetric (A_0 = I / lambda0; the update subtracts (z_c z_j) / dc, a product that
// is the same number for (c, j) and (j, c); the refresh adds eta I), so A x = A^T x is a column walk
// and thread j never reads another thread's column of A: A needs no sharing at all. That is what makes
// d = 128 fit: S, dS, dA padded are 3 x 128 x 129 floats = 198 KB of the H100's 227 KB per block, and
// a fourth (A) does not fit (264 KB in all); so at d = 128 thread j holds its column of A in 128
// registers (AColumn<.., kRegs>), and in the sequence walk at d = 32 in 32 (a_in_registers); otherwise
// in shared memory (registers there are taken by the slot prefetch below). Splitting rows across warps
// or CTAs was the alternative: it would change every mat-vec and reduction of the kernel and add
// cross-CTA synchronisation per step, for a layout that the symmetry of A makes unnecessary.
// Every scalar a step needs (norms, dot products) is a block sum that leaves bitwise the same value in
// all threads (BlockSum: warp shuffles, then one barrier). Otherwise this is the simple, race-free form,
// not tuned further (docs/gpu.md gives its measured cost against the forward).
// The group-parallel VLA backward (vla_group_backward, at the end) runs the same kernel over one group of
// tokens per block, from a carry the chains between its walks provide (Walk below).
#include "gpu/recurrent_backward.hpp"

#include "core/phi.hpp"
#include "gpu/group_chain.cuh"

#include <algorithm>

namespace vla::gpu {
namespace {

using group_chain::GroupArgs;
using group_chain::kChainThreads;
using group_chain::vla_group_chain_kernel;

template <int D> struct Smem {
  static constexpr int LD = D + 1, MAT = D * LD, NRED = 2;
  // Bcast4 reads a shared vector 16 bytes at a time: every vector must start a multiple of 4 floats into the
  // (16-byte aligned) dynamic shared memory, after whole matrices and whole vectors.
  static_assert(D % 4 == 0 && MAT % 4 == 0, "the shared vectors' 16-byte alignment");
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

// Several d-long walks of one step fused into one loop over c: a step's mat-vecs and rank-1 updates that
// wait on the same barrier and touch different data run together, so each iteration has several
// independent loads and FMA chains in flight (one warp per SM at d = 32: nothing else hides the latency).
// Each dot keeps row_dot's 4 chains (c mod 4) and their order, so a fused result is bitwise the unfused
// one. U: the unroll factor (4, or d / 4 where the body indexes a register array: all indices constant).
// Where A's column is in registers its walks are fully unrolled; at d = 128 a shared-matrix walk fused
// into one keeps so many loads in flight that ptxas spills, so there the two run apart (kFuseA false); at
// d = 32 they fit together (168 registers either way, no spills).
struct Acc4 {
  float a[4] = {0.f, 0.f, 0.f, 0.f};
  __device__ __forceinline__ void add(int r, float m, float x) { a[r] = fmaf(m, x, a[r]); }
  __device__ __forceinline__ float sum() const { return (a[0] + a[1]) + (a[2] + a[3]); }
};
template <int D, int U, class Body> __device__ __forceinline__ void walk(Body&& body) {
#pragma unroll U
  for (int c = 0; c < D; c += 4) {
#pragma unroll
    for (int r = 0; r < 4; ++r) body(c + r, r);  // chain r takes c = r mod 4
  }
}
// A shared vector's entry c inside walk(), read four entries at a time. In a walk that also stores to
// shared memory the compiler keeps each read of a broadcast vector a load of its own (a store in between
// might alias it), one shared load per entry; this makes it one per four, the same values. v + c is
// 16-byte aligned where r == 0: every vector starts a multiple of 4 floats into the 16-byte aligned
// dynamic shared memory (Smem's MAT and d are multiples of 4), and c is then a multiple of 4.
struct Bcast4 {
  const float* v;
  float4 q;
  __device__ __forceinline__ float operator()(int c, int r) {
    if (r == 0) q = *reinterpret_cast<const float4*>(v + c);
    return r == 0 ? q.x : r == 1 ? q.y : r == 2 ? q.z : q.w;
  }
};
// Column j of M += a b_j (thread j's share of the rank-1 update M += a b^T; a a shared vector).
template <int D> __device__ __forceinline__ void col_axpy(float* M, int j, const float* a, float bj) {
  Bcast4 a4{a};
  walk<D, 4>([&](int c, int r) { M[c * Smem<D>::LD + j] = fmaf(a4(c, r), bj, M[c * Smem<D>::LD + j]); });
}

// The block's barrier. At d <= 32 a block is one warp, and the warp's own barrier orders its shared-memory
// accesses (__syncwarp's memory ordering among the lanes it names) at less cost than the block's.
template <int D> __device__ __forceinline__ void block_sync() {
  if constexpr (D <= 32) __syncwarp(D >= 32 ? 0xffffffffu : (1u << D) - 1u);
  else __syncthreads();
}

// Block-wide sums of N <= NRED values. Within a warp a xor butterfly of shuffles (every lane ends with
// bitwise the same sum: each level adds the same two numbers, in either order); across the NW warps one
// partial per warp through shared memory and ONE barrier, read back by every thread in the same order.
// The barrier also publishes the caller's earlier shared writes and orders every shared access before the
// call against every one after it; callers rely on that. The partials alternate between two buffers: a
// thread that runs ahead into the next call writes the other one, and by the call after that every
// thread has passed the next call's barrier, so has finished reading. Why shuffles first: a sum then
// costs one barrier, not two, and no thread reads d partials from shared memory.
template <int D> struct BlockSum {
  static constexpr int LANES = D < 32 ? D : 32, NW = D / LANES, NRED = Smem<D>::NRED;
  static constexpr int FLOATS = 2 * NRED * NW;  // shared floats it needs
  static constexpr unsigned MASK = D >= 32 ? 0xffffffffu : (1u << D) - 1u;
  float* part;  // FLOATS shared floats
  int buf = 0;
  template <int N> __device__ __forceinline__ void operator()(float (&x)[N]) {
    static_assert(N <= NRED);
#pragma unroll
    for (int off = 1; off < LANES; off <<= 1)
#pragma unroll
      for (int n = 0; n < N; ++n) x[n] += __shfl_xor_sync(MASK, x[n], off);
    float* b = part + buf * (NRED * NW);
    if constexpr (NW > 1) {
      if ((threadIdx.x & 31) == 0)
#pragma unroll
        for (int n = 0; n < N; ++n) b[n * NW + (threadIdx.x >> 5)] = x[n];
    }
    block_sync<D>();
    if constexpr (NW > 1) {
#pragma unroll
      for (int n = 0; n < N; ++n) {
        float a = 0.f;
#pragma unroll
        for (int w = 0; w < NW; ++w) a += b[n * NW + w];
        x[n] = a;
      }
    }
    buf ^= 1;
  }
};

// Column j of the symmetric A (file comment): shared memory or registers (a_in_registers says which).
// Both forms compute the same numbers in the same order.
enum class AHome { None, Shared, Regs };
template <int D, AHome W> struct AColumn {  // None: the rule has no A (linear attention, DeltaNet)
  static constexpr int kUnroll = 4;
  __device__ void init(float) {}
  __device__ void save(float*) const {}
  __device__ void load(const float*) {}
  __device__ void symmetrise(const float*) {}
};
template <int D> struct AColumn<D, AHome::Shared> {
  static constexpr int kUnroll = 4;  // walk()'s unroll over A
  float* M;  // the d x d matrix in shared memory, row stride LD; this thread touches column j only
  __device__ float get(int c) const { return M[c * Smem<D>::LD + threadIdx.x]; }
  __device__ void set(int c, float v) { M[c * Smem<D>::LD + threadIdx.x] = v; }
  __device__ void add_diag(float eta) { M[threadIdx.x * Smem<D>::LD + threadIdx.x] += eta; }
  __device__ void init(float diag) {
    for (int c = 0; c < D; ++c) set(c, c == int(threadIdx.x) ? diag : 0.f);
  }
  __device__ void save(float* dst) const {  // dst: a slot's A half, row-major d x d
    for (int c = 0; c < D; ++c) dst[c * D + threadIdx.x] = get(c);
  }
  __device__ void load(const float* src) {
    for (int c = 0; c < D; ++c) set(c, src[c * D + threadIdx.x]);
  }
  // After load(src): A = (A + A^T) / 2, from row j of src. (a + b) / 2 is the same float for (c, j) and
  // (j, c), so the result is symmetric to the bit (a checkpoint made by the forward kernel, which is not).
  __device__ void symmetrise(const float* src) {
    for (int c = 0; c < D; ++c) set(c, 0.5f * (get(c) + src[threadIdx.x * D + c]));
  }
};
template <int D> struct AColumn<D, AHome::Regs> {
  static constexpr int kUnroll = D / 4;  // walks over a[] fully unrolled: constant indices keep it in registers
  float a[D];
  __device__ float get(int c) const { return a[c]; }
  __device__ void set(int c, float v) { a[c] = v; }
  __device__ void add_diag(float eta) {
    if (eta != 0.f)  // 1 step in refresh_period: a[j] += eta without a dynamic register index
#pragma unroll
      for (int c = 0; c < D; ++c) a[c] += c == int(threadIdx.x) ? eta : 0.f;
  }
  __device__ void init(float diag) {
#pragma unroll
    for (int c = 0; c < D; ++c) a[c] = c == int(threadIdx.x) ? diag : 0.f;
  }
  __device__ void save(float* dst) const {
#pragma unroll
    for (int c = 0; c < D; ++c) dst[c * D + threadIdx.x] = a[c];
  }
  __device__ void load(const float* src) {  // D independent loads in flight at once
#pragma unroll
    for (int c = 0; c < D; ++c) a[c] = src[c * D + threadIdx.x];
  }
  __device__ void symmetrise(const float* src) {
#pragma unroll
    for (int c = 0; c < D; ++c) a[c] = 0.5f * (a[c] + src[threadIdx.x * D + c]);
  }
};

// The forward state a step starts from -- S (shared: rows and columns are read), column j of A, thread
// j's zs -- and its traffic to and from the workspace slots (S, A: d x d row-major, then zs: d). Thread
// j moves only its own column, which only it writes, so a save needs no barrier of its own.
// Prefetch: where 2d + 1 (with A) or d + 1 slot floats fit in registers next to the rest, `fetch`
// issues a slot's loads into registers and `commit` writes them into the state later, so that the
// reverse pass issues step t-1's loads at the top of step t and they land while step t computes (one
// L2 round trip per step, overlapped, instead of 2d dependent ones). Where they do not fit (VLA at
// d = 128: 257 registers, and A already takes 128), `commit` loads the slot itself.
// V > 0: a re-run step's V step values (Slots::values) travel with its slot, into `v` at commit.
template <int D, bool WITH_A, bool A_REGS = false, int V = 0> struct State {
  static constexpr AHome kA = !WITH_A ? AHome::None : A_REGS ? AHome::Regs : AHome::Shared;
  static constexpr int kSlotFloats = WITH_A ? 2 * D + 1 : D + 1;  // per thread
  static constexpr bool kPrefetch = kSlotFloats <= 2 * 64 + 1;
  using AType = AColumn<D, kA>;
  static constexpr bool kFuseA = kA != AHome::Regs || D <= 32;  // see walk()
  float* S;
  AType A;
  float zs = 0.f;
  float r[kPrefetch ? kSlotFloats : 1];
  const float* pending = nullptr;
  float v[V > 0 ? V : 1];   // the committed step's values
  float rv[kPrefetch && V > 0 ? V : 1];
  const float* pending_v = nullptr;

  __device__ void init(float a_diag) {  // S_0 = 0, A_0 = a_diag I, zs_0 = 0 (line 4)
    for (int c = 0; c < D; ++c) S[c * Smem<D>::LD + threadIdx.x] = 0.f;
    A.init(a_diag);
    zs = 0.f;
  }
  __device__ void save(float* slot) const {
    const int j = threadIdx.x;
    for (int c = 0; c < D; ++c) slot[c * D + j] = S[c * Smem<D>::LD + j];
    A.save(slot + D * D);
    slot[2 * D * D + j] = zs;
  }
  // values: the step's values (V of them), or null (a checkpoint: no reverse step reads them).
  __device__ void fetch(const float* slot, const float* values = nullptr) {
    const int j = threadIdx.x;
    if constexpr (kPrefetch) {
#pragma unroll
      for (int c = 0; c < D; ++c) {
        r[c] = slot[c * D + j];
        if constexpr (WITH_A) r[D + c] = slot[D * D + c * D + j];
      }
      r[kSlotFloats - 1] = slot[2 * D * D + j];
      if constexpr (V > 0)
        if (values)
#pragma unroll
          for (int i = 0; i < V; ++i) rv[i] = values[i * D + j];
    } else {
      pending = slot;
    }
    pending_v = values;
  }
  // Writes the fetched slot into the state; the caller has made sure no thread still reads S.
  __device__ void commit() {
    const int j = threadIdx.x;
    if constexpr (kPrefetch) {
#pragma unroll
      for (int c = 0; c < D; ++c) {
        S[c * Smem<D>::LD + j] = r[c];
        if constexpr (WITH_A) A.set(c, r[D + c]);
      }
      zs = r[kSlotFloats - 1];
      if constexpr (V > 0)
        if (pending_v)
#pragma unroll
          for (int i = 0; i < V; ++i) v[i] = rv[i];
    } else {
      A.load(pending + D * D);
      constexpr int B = 32;  // S in batches of 32 loads in flight, then 32 shared stores
#pragma unroll 1
      for (int c0 = 0; c0 < D; c0 += B) {
        float b[B];
#pragma unroll
        for (int c = 0; c < B; ++c) b[c] = pending[(c0 + c) * D + j];
#pragma unroll
        for (int c = 0; c < B; ++c) S[(c0 + c) * Smem<D>::LD + j] = b[c];
      }
      zs = pending[2 * D * D + j];
      if constexpr (V > 0)
        if (pending_v)
#pragma unroll
          for (int i = 0; i < V; ++i) v[i] = pending_v[i * D + j];
    }
  }
};

// One token's inputs, read one step ahead of their use (they do not depend on the state), so the
// global-load latency overlaps the step before.
struct Tok { float k = 0.f, v = 0.f, u = 0.f, g = 0.f, q = 0.f, dout = 0.f; };
template <RecurrentKind K, int D> struct TokenReader {
  RecurrentTensors x;
  const float* dout;
  long long seq;
  __device__ Tok operator()(int t, bool reverse) const {
    Tok r;
    const long long o = (seq * x.T + t) * D + threadIdx.x;
    r.k = x.k[o];
    r.v = x.v[o];
    if constexpr (K == RecurrentKind::Vla) r.u = x.u[o];
    if constexpr (K == RecurrentKind::DeltaNet) r.g = x.g ? x.g[seq * x.T + t] : 0.f;
    if (reverse) { r.q = x.q[o]; r.dout = dout[o]; }
    return r;
  }
};

// Sequence `seq`'s workspace: one checkpoint slot per chunk, then CH scratch slots, and CH steps of step
// values (recurrent_backward_workspace_floats). The slots' layout is backward_checkpoint_offset's
// (gpu/recurrent_forward.hpp), which the forward kernel writes checkpoints by.
template <int D> struct Slots {
  static constexpr int CH = kBackwardChunk;
  static constexpr long long SLOT = backward_slot_floats(D), VALUES = backward_step_values_floats(D);
  float* ck;
  float* scratch;
  float* vals;
  // Sequence seq of seqs, its step values after every sequence's slots.
  __device__ Slots(float* ws, long long seq, long long seqs, int T) {
    ck = ws + backward_checkpoint_offset(seq, T, D, 0);
    scratch = ck + (T + CH - 1) / CH * SLOT;
    vals = ws + backward_checkpoint_offset(seqs, T, D, 0) + seq * CH * VALUES;
  }
  // A group walk's own scratch (group_scratch_floats): CH slots, then CH steps of values.
  __device__ Slots(float* ws, long long seq, int T, float* own_scratch) {
    ck = ws + backward_checkpoint_offset(seq, T, D, 0);
    scratch = own_scratch;
    vals = own_scratch + CH * SLOT;
  }
  __device__ float* checkpoint(int c) const { return ck + c * SLOT; }
  __device__ float* step(int i) const { return scratch + i * SLOT; }
  __device__ float* values(int i) const { return vals + i * VALUES; }
};
// A group walk's scratch: CH state slots and CH steps of values.
__host__ __device__ constexpr long long group_scratch_floats(int d) {
  return kBackwardChunk * (backward_slot_floats(d) + backward_step_values_floats(d));
}

// The recompute-from-checkpoints schedule (file comment), shared by the three rules.
//   fwd(t, tok, values): step t of the forward, st holding the state before it, updated in place to after
//     it; values: where to leave the step's values for its reverse step (a re-run chunk), or null;
//   rev(t, tok): step t of the reverse, st holding the state before step t (it must not change it).
// Over the chunks [c0, c1) (the whole sequence, or one group of the group-parallel backward): pass 1 saves
// the state before every CH-th step, from the initial state, or (`from_start`) from the checkpoint of
// chunk c0, which then must exist; pass 2 takes the chunks from the last, re-runs the chunk from its
// checkpoint saving the state before each step, then runs its reverse steps. fill_only: pass 1 alone.
// given: every checkpoint of [c0, c1) has been written (by the forward kernel, x.checkpoints, or by an
// earlier walk), so pass 1 is skipped. A forward kernel's A is symmetric only up to rounding, and the
// reverse steps read A x as a column walk (A^T x); so A is replaced by (A + A^T) / 2 at each checkpoint
// load, once per chunk (d loads per thread), rather than making the forward kernel's update symmetric (a
// multiply more per element on every step of every forward, also the ones no backward follows). The
// chunk's own re-run keeps it symmetric from there, as pass 1 does (its checkpoints need no symmetrising).
template <int D, class St, class Read, class Fwd, class Rev>
__device__ __forceinline__ void two_passes(int T, int c0, int c1, bool given, bool from_start, const Slots<D>& ws, St& st,
                                           const Read& read, Fwd&& fwd, Rev&& rev, bool fill_only = false) {
  constexpr int CH = kBackwardChunk;
  auto forward = [&](int t0, int t1, bool checkpoints) {
    Tok nx = read(t0, false);
    for (int t = t0; t < t1; ++t) {
      const Tok cur = nx;
      if (t + 1 < t1) nx = read(t + 1, false);
      if (!checkpoints) st.save(ws.step(t - t0));
      else if (t % CH == 0) st.save(ws.checkpoint(t / CH));
      fwd(t, cur, checkpoints ? nullptr : ws.values(t - t0));
    }
  };
  auto load = [&](int c) {  // the state before chunk c's first step, A symmetrised (see above)
    st.fetch(ws.checkpoint(c));
    block_sync<D>();  // every reader of S from the previous chunk's reverse steps is done
    st.commit();
    if (given || from_start) st.A.symmetrise(ws.checkpoint(c) + D * D);  // this thread's column only: no barrier
    block_sync<D>();
  };
  if (!given) {
    if (from_start) load(c0);
    forward(c0 * CH, min(T, c1 * CH), true);
  }
  if (fill_only) return;
  for (int c = c1 - 1; c >= c0; --c) {
    const int t0 = c * CH, t1 = min(T, t0 + CH);
    load(c);
    forward(t0, t1, false);
    st.fetch(ws.step(t1 - 1 - t0), ws.values(t1 - 1 - t0));
    Tok nx = read(t1 - 1, true);
    for (int t = t1 - 1; t >= t0; --t) {
      const Tok cur = nx;
      block_sync<D>();  // the previous reverse step's readers of S are done
      st.commit();      // the state before step t
      if (t > t0) {     // step t-1's, in flight during step t
        st.fetch(ws.step(t - 1 - t0), ws.values(t - 1 - t0));
        nx = read(t - 1, true);
      }
      rev(t, cur);
    }
  }
}

// The read (Alg. 1 line 26, eq. 11) and its adjoint, the same for the three rules:
//   o = S_t qf / den,  S_t qf = beta S_{t-1} qf + e (w.qf),  den = max(zs_t.qf, eps)
// with w the write key (VLA: alpha_hat; DeltaNet: k_hat; linear: phi(k), e = v) and beta the gate
// (1 but for gated DeltaNet). g = do / den; dqf = S_t^T g - (g.o) zs_t, dzs -= (g.o) qf (unclamped
// den only; the clamped branch is a constant); dS += g qf^T. Returns dL/dq_raw_j.
template <int D>
__device__ __forceinline__ float read_adjoint(float qr, float dor, float zst, float beta, float w, float e, const float* S,
                                              float* dS, float* sh_qf, float* sh_g, BlockSum<D>& sums, float eps, float& dzs) {
  const int j = threadIdx.x;
  const float qf = elu_plus_one(qr);  // phi, line 24
  sh_qf[j] = qf;
  block_sync<D>();
  const float Sq = row_dot<D>(S, j, sh_qf);
  float r4[2] = {zst * qf, w * qf};
  sums(r4);
  const float den = r4[0] < eps ? eps : r4[0];
  const float o_j = (beta * Sq + e * r4[1]) / den;
  const float gj = dor / den;
  sh_g[j] = gj;
  float r5[2] = {gj * o_j, e * gj};
  sums(r5);
  Acc4 sg;  // (S_{t-1}^T g)_j, and dS += g qf^T (column j)
  Bcast4 g4{sh_g};
  walk<D, 4>([&](int c, int r) {
    const float gc = g4(c, r);
    sg.add(r, S[c * Smem<D>::LD + j], gc);
    dS[c * Smem<D>::LD + j] = fmaf(gc, qf, dS[c * Smem<D>::LD + j]);
  });
  float dqf = beta * sg.sum() + w * r5[1];  // S_t^T g
  if (!(r4[0] < eps)) {
    dqf -= r5[0] * zst;
    dzs -= r5[0] * qf;
  }
  block_sync<D>();
  return dqf * elu_plus_one_grad(qr);
}

// ---------------------------------------------------------------------------------------------------
// VLA. Step t's forward quantities from S = S_{t-1}, A = A_{t-1} (Alg. 1 lines 8-21), thread j's share.
struct StepVals { float kf, nk, kh, nu, uu, z, delta, dc, eta, ah, na, e; };

// Which walk a VLA backward block does. Sequence: the whole reverse pass of one (b, h). The others are the
// group-parallel backward's walks of one group [a, b) of tokens (docs/chunkwise-vla.md, "The backward
// across groups"), each the sequential reverse step started from a set carry (dS, dz, dA) at b:
//   B1: from (0, 0, 0); leaves dS^0_a, dz^0_a and R_g = M_{b-1} ... M_a, M_t = I - alpha_hat_t k_hat_t^T
//   B2: from (dS_b, dz_b, 0); leaves sym(dA^0_a) and Phi_g = F_{b-1} ... F_a, F_t = I - zv_t u_t^T / delta_t
//   B3: from (dS_b, dz_b, Sigma_b); writes the group's rows of dq, dk, dv, du
// The chains between them (C1, C2) and the buffers (GroupArgs) are gpu/group_chain.cuh's. Fill: the forward
// alone over a group from its first checkpoint, writing the others (where a forward left only every group's
// first).
enum class Walk { Sequence, Fill, B1, B2, B3 };
__host__ __device__ constexpr bool writes_grads(Walk w) { return w == Walk::Sequence || w == Walk::B3; }
__host__ __device__ constexpr bool has_product(Walk w) { return w == Walk::B1 || w == Walk::B2; }
// Where column j of A lives (AColumn). Registers at d = 128, where shared memory cannot hold it, and in the
// sequence walk at d = 32, where they are to spare: 165 registers with the slot prefetch, the same numbers in
// the same order, 4-7% faster than from shared memory at every measured shape, from 32 sequences of 4096
// tokens to 4096 of 25 (gpu/dev/fused_backward_bench.cu, docs/gpu.md). At d = 16 registers were faster only
// with the device full and slower for few sequences; at d = 64 they would not fit beside the prefetch. The
// group walks keep their product matrix (R_g, Phi_g) in shared memory beside A.
__host__ __device__ constexpr bool a_in_registers(int d, Walk w) { return d > 64 || (d == 32 && w == Walk::Sequence); }

// Shared-memory plan of the VLA kernel: dS, dA, S (padded), A (padded, where not in registers), R_g or Phi_g
// (padded; B1 and B2 only), 10 vectors (11 with a product), the sums' partials: 199 KiB at d = 128
// (opt-in above 48 KB; the H100 allows 227 KiB).
template <int D, Walk W> struct VlaSmem {
  static constexpr bool kProduct = has_product(W), kAShared = !a_in_registers(D, W);
  static constexpr int MATS = (kAShared ? 4 : 3) + kProduct, VECS = 10 + kProduct;
  static constexpr int FLOATS = MATS * Smem<D>::MAT + VECS * D + BlockSum<D>::FLOATS;
};

// k_hat and u from phi(k), u_raw and their norms (lines 9, 10).
template <int D> __device__ __forceinline__ void unit_inputs(StepVals& s, const Tok& in, const RecurrentParams& prm) {
  s.kh = !prm.normalise_key || s.nk == 0.f ? s.kf : s.kf / s.nk;      // line 9
  s.uu = s.nu == 0.f ? 0.f : in.u * (rsqrtf(float(D)) / s.nu);         // line 10
}
// The clamped denominator (line 13: NaN -> eps, as the CPU rule) and the refresh (line 16) of step t.
__device__ __forceinline__ void clamp_and_refresh(StepVals& s, int t, const RecurrentParams& prm) {
  s.dc = s.delta >= prm.eps ? s.delta : prm.eps;
  s.eta = (prm.refresh_period > 0 && (t + 1) % prm.refresh_period == 0) ? prm.refresh_eta : 0.f;
}

template <int D, class St>
__device__ __forceinline__ StepVals prelude(int t, const Tok& in, const St& st, float* sh_kh, float* sh_uu, float* sh_z,
                                            float* sh_ah, float* sh_e, BlockSum<D>& sums,
                                            const RecurrentParams& prm) {
  const int j = threadIdx.x;
  StepVals s;
  s.kf = elu_plus_one(in.k);                                           // phi, line 8
  float r1[2] = {s.kf * s.kf, in.u * in.u};
  sums(r1);  // also the step's opening barrier: every earlier reader of sh_* is done
  s.nk = sqrtf(r1[0]);
  s.nu = sqrtf(r1[1]);
  unit_inputs<D>(s, in, prm);
  sh_kh[j] = s.kh;
  sh_uu[j] = s.uu;
  block_sync<D>();
  Acc4 az, ak, sk;  // A_{t-1} u, A_{t-1} k_hat (columns: A is symmetric), S_{t-1} k_hat (rows)
  walk<D, St::AType::kUnroll>([&](int c, int r) {
    const float a = st.A.get(c);
    az.add(r, a, sh_uu[c]);
    ak.add(r, a, sh_kh[c]);
    if constexpr (St::kFuseA) sk.add(r, st.S[j * Smem<D>::LD + c], sh_kh[c]);
  });
  if constexpr (!St::kFuseA) walk<D, 4>([&](int c, int r) { sk.add(r, st.S[j * Smem<D>::LD + c], sh_kh[c]); });
  s.z = az.sum();                                                      // z = A_{t-1} u (line 12)
  const float Akh = ak.sum(), Skh = sk.sum();
  sh_z[j] = s.z;
  float r2[2] = {s.uu * s.z, s.z * s.kh};
  sums(r2);
  s.delta = 1.f + r2[0];                                               // line 12
  clamp_and_refresh(s, t, prm);
  const float al = Akh - s.z * (r2[1] / s.dc) + s.eta * s.kh;         // alpha = A_t k_hat (lines 14, 16, 19)
  s.e = in.v - Skh;                                                    // line 21
  float r3[1] = {al * al};
  sums(r3);
  s.na = sqrtf(r3[0]);
  s.ah = s.na == 0.f ? 0.f : al / s.na;                                // line 20
  sh_ah[j] = s.ah;
  sh_e[j] = s.e;
  block_sync<D>();
  return s;
}

// The step values a re-run step leaves for its reverse step (Slots::values): what prelude computes with
// walks and block sums. The rest of StepVals follows from them and the inputs by prelude's own formulas.
__device__ __forceinline__ void save_step_values(float* dst, const StepVals& s, int d) {
  const int j = threadIdx.x;
  const float v[kBackwardStepValues] = {s.z, s.ah, s.e, s.nk, s.nu, s.delta, s.na};
#pragma unroll
  for (int i = 0; i < kBackwardStepValues; ++i) dst[i * d + j] = v[i];
}
// prelude's StepVals, bitwise, from the values its re-run saved, publishing the same vectors. No barrier:
// the caller's next one publishes them (the reverse step's state commit was preceded by one, so every
// earlier reader of sh_* is done).
template <int D>
__device__ __forceinline__ StepVals recalled_prelude(int t, const Tok& in, const float (&v)[kBackwardStepValues], float* sh_kh,
                                                     float* sh_uu, float* sh_z, float* sh_ah, float* sh_e,
                                                     const RecurrentParams& prm) {
  const int j = threadIdx.x;
  StepVals s;
  s.kf = elu_plus_one(in.k);
  s.z = v[0];
  s.ah = v[1];
  s.e = v[2];
  s.nk = v[3];
  s.nu = v[4];
  s.delta = v[5];
  s.na = v[6];
  unit_inputs<D>(s, in, prm);
  clamp_and_refresh(s, t, prm);
  sh_kh[j] = s.kh;
  sh_uu[j] = s.uu;
  sh_z[j] = s.z;
  sh_ah[j] = s.ah;
  sh_e[j] = s.e;
  return s;
}

template <int D, Walk W>
__global__ void __launch_bounds__(D) vla_backward_kernel(const RecurrentTensors x, const RecurrentGrads g,
                                                         const RecurrentParams prm, float* workspace, const GroupArgs ga) {
  constexpr bool kProduct = has_product(W), kWrite = writes_grads(W);
  constexpr bool kARegs = a_in_registers(D, W);
  static_assert(W == Walk::Sequence || !kARegs, "the group walks keep R_g / Phi_g beside A: d <= 64");
  using L = VlaSmem<D, W>;
  constexpr int LD = Smem<D>::LD, MAT = Smem<D>::MAT;
  extern __shared__ __align__(16) float sm[];
  float* dS = sm;
  float* dA = dS + MAT;
  float* P = sm + (L::MATS - 1) * MAT;  // R_g (B1) or Phi_g (B2): the last matrix
  float* v0 = sm + L::MATS * MAT;
  float *sh_kh = v0, *sh_uu = v0 + D, *sh_z = v0 + 2 * D, *sh_ah = v0 + 3 * D, *sh_e = v0 + 4 * D,
        *sh_qf = v0 + 5 * D, *sh_g = v0 + 6 * D, *sh_de = v0 + 7 * D, *sh_dal = v0 + 8 * D, *sh_dz = v0 + 9 * D,
        *sh_p = v0 + 10 * D;  // sh_p: P alpha_hat (B1) or P zv (B2)
  BlockSum<D> sums{v0 + L::VECS * D};

  const int j = threadIdx.x;
  const long long seq = W == Walk::Sequence ? blockIdx.x : blockIdx.x / ga.groups;
  const int grp = W == Walk::Sequence ? 0 : int(blockIdx.x % ga.groups);
  const long long slot = seq * ga.groups + grp;  // the group's buffers (GroupArgs)
  constexpr long long kCarry = 2LL * D * D + D;
  State<D, true, kARegs, kBackwardStepValues> st;
  constexpr int AU = decltype(st)::AType::kUnroll;
  constexpr bool kFuseA = decltype(st)::kFuseA;
  st.S = dA + MAT;
  if constexpr (L::kAShared) st.A.M = st.S + MAT;
  st.init(1.f / prm.lambda0);  // S_0 = 0, A_0 = I / lambda0 (line 4)
  // The adjoints after the walk's last step: zero after the sequence's last step (and for B1); the
  // chains' carry at the group's end otherwise (B2 without its dA: that is what it measures).
  const float* cin = W == Walk::B2 || W == Walk::B3 ? ga.carry + slot * kCarry : nullptr;
  for (int c = 0; c < D; ++c) {
    dS[c * LD + j] = W == Walk::B2 || W == Walk::B3 ? cin[c * D + j] : 0.f;
    dA[c * LD + j] = W == Walk::B3 ? cin[D * D + c * D + j] : 0.f;
    if constexpr (kProduct) P[c * LD + j] = c == j ? 1.f : 0.f;
  }
  float dzs = W == Walk::B2 || W == Walk::B3 ? cin[2 * D * D + j] : 0.f;
  block_sync<D>();

  auto fwd = [&](int t, const Tok& in, float* values) {  // lines 8-22, 25
    const StepVals s = prelude<D>(t, in, st, sh_kh, sh_uu, sh_z, sh_ah, sh_e, sums, prm);
    if (values) save_step_values(values, s, D);
    // A -= z z^T / dc with the product z_c z_j formed first (the same number for (c, j) and (j, c): A stays
    // symmetric to the bit), A += eta I on refresh steps (lines 14, 16); S += e ah^T (line 22).
    const float inv_dc = 1.f / s.dc;
    Bcast4 z4{sh_z}, e4{sh_e};
    walk<D, AU>([&](int c, int r) {
      st.A.set(c, fmaf(-(z4(c, r) * s.z), inv_dc, st.A.get(c)));
      st.S[c * LD + j] = fmaf(e4(c, r), s.ah, st.S[c * LD + j]);
    });
    st.A.add_diag(s.eta);
    st.zs += s.kf;
  };
  // Lines 19 and 12 end alike: dA += x w^T (x the adjoint just formed, w = kh resp. u) and
  // (A_{t-1}^T x)_j for the input's adjoint, both in one pass over column j of A and dA. sh_x publishes
  // x_j to the block; w_j is this thread's element.
  auto rank1_and_At_x = [&](float* sh_x, float xj, float wj) {
    sh_x[j] = xj;
    block_sync<D>();
    Acc4 acc;
    Bcast4 x4{sh_x};
    walk<D, AU>([&](int c, int r) {
      const float xc = x4(c, r);
      if constexpr (kFuseA) dA[c * LD + j] = fmaf(xc, wj, dA[c * LD + j]);
      acc.add(r, st.A.get(c), xc);
    });
    if constexpr (!kFuseA) col_axpy<D>(dA, j, sh_x, wj);
    return acc.sum();
  };
  auto rev = [&](int t, const Tok& in) {
    const long long o = (seq * x.T + t) * D + j;
    const StepVals s = recalled_prelude<D>(t, in, st.v, sh_kh, sh_uu, sh_z, sh_ah, sh_e, prm);
    const float dq = read_adjoint<D>(in.q, in.dout, st.zs + s.kf, 1.f, s.ah, s.e, st.S, dS, sh_qf, sh_g, sums, prm.eps, dzs);
    if constexpr (kWrite) g.dq[o] = dq;
    float dkf = dzs;                                                 // line 25
    // Line 22: de = dS ah, dah = dS^T e;  line 21: dv = de, dS -= de kh^T, dkh = -S_{t-1}^T de.
    // So dS_{t-1} = dS M_t: B1 takes R_g the same way, R <- R M_t = R - (R ah) kh^T.
    Acc4 a_de, a_dah, a_p;
    walk<D, 4>([&](int c, int r) {
      a_de.add(r, dS[j * LD + c], sh_ah[c]);
      if constexpr (W != Walk::B1) a_dah.add(r, dS[c * LD + j], sh_e[c]);
      if constexpr (W == Walk::B1) a_p.add(r, P[j * LD + c], sh_ah[c]);
    });
    const float de = a_de.sum(), dah = a_dah.sum();
    sh_de[j] = de;
    if constexpr (W == Walk::B1) sh_p[j] = a_p.sum();
    float r6[1] = {s.ah * dah};
    sums(r6);  // all reads of dS done before the update below
    if constexpr (kWrite) g.dv[o] = de;
    Acc4 a_sde;
    Bcast4 de4{sh_de}, p4{sh_p};
    walk<D, 4>([&](int c, int r) {
      const float dec = de4(c, r);
      dS[c * LD + j] = fmaf(dec, -s.kh, dS[c * LD + j]);
      if constexpr (W == Walk::B1) P[c * LD + j] = fmaf(p4(c, r), -s.kh, P[c * LD + j]);
      if constexpr (kWrite) a_sde.add(r, st.S[c * LD + j], dec);
    });
    // B1 is after dS and dz alone (neither reads dA): the rest of the step is dA's and the gradients'. The
    // next step's first block sum is the barrier its shared writes wait on, as after a full step.
    if constexpr (W == Walk::B1) return;
    float dkh = -a_sde.sum();
    // Line 20: dalpha = (dah - ah (ah.dah)) / na;  line 19: dA += dalpha kh^T, dkh += A_t^T dalpha.
    const float dal = s.na == 0.f ? 0.f : (dah - s.ah * r6[0]) / s.na;
    const float adal = rank1_and_At_x(sh_dal, dal, s.kh);
    float r7[1] = {s.z * dal};
    sums(r7);  // also orders the dA update before the dA reads below
    dkh += adal - s.z * (r7[0] / s.dc) + s.eta * dal;  // A_t^T dalpha from A_{t-1}^T dalpha
    // Lines 14, 16: dz = -(dA + dA^T) z / dc, ddc = z^T dA z / dc^2; line 13: zero if clamped.
    // So sym(dA_{t-1}) = F_t^T sym(dA_t) F_t: B2 takes Phi_g the same way, Phi <- Phi F_t =
    // Phi - (Phi zv) u^T / delta (zv = z here, u = uu; the refresh's eta I adds nothing).
    Acc4 a_rz, a_cz, a_pz;
    walk<D, 4>([&](int c, int r) {
      a_rz.add(r, dA[j * LD + c], sh_z[c]);
      a_cz.add(r, dA[c * LD + j], sh_z[c]);
      if constexpr (W == Walk::B2) a_pz.add(r, P[j * LD + c], sh_z[c]);
    });
    const float rowz = a_rz.sum(), colz = a_cz.sum();
    if constexpr (W == Walk::B2) sh_p[j] = a_pz.sum();
    float dz = -(rowz + colz) / s.dc;
    float r8[1] = {s.z * rowz};
    sums(r8);
    const float ddelta = s.delta >= prm.eps ? r8[0] / (s.dc * s.dc) : 0.f;
    // Line 12: du = ddelta z + A_{t-1}^T dz, dz += ddelta u, dA += dz u^T.
    float du = ddelta * s.z;
    dz += ddelta * s.uu;
    du += rank1_and_At_x(sh_dz, dz, s.uu);
    if constexpr (W == Walk::B2) col_axpy<D>(P, j, sh_p, -s.uu / s.dc);
    if constexpr (!kWrite) return;  // B2 is after dA: dkh and du feed only the gradients
    // Line 10: du_raw = (s / nu)(du - uh (uh.du));  line 9: dkf += (dkh - kh (kh.dkh)) / nk (or dkh
    // where k_hat = phi(k));  line 8.
    float r9[2] = {in.u * du, s.kh * dkh};
    sums(r9);
    if constexpr (kWrite) g.du[o] = s.nu == 0.f ? 0.f : (rsqrtf(float(D)) / s.nu) * (du - in.u * (r9[0] / (s.nu * s.nu)));
    if (!prm.normalise_key) dkf += dkh;
    else if (s.nk != 0.f) dkf += (dkh - s.kh * r9[1]) / s.nk;
    if constexpr (kWrite) g.dk[o] = dkf * elu_plus_one_grad(in.k);
  };
  const TokenReader<RecurrentKind::Vla, D> read{x, g.dout, seq};
  if constexpr (W == Walk::Sequence) {
    two_passes<D>(x.T, 0, (x.T + kBackwardChunk - 1) / kBackwardChunk, x.checkpoints != nullptr, false,
                  Slots<D>(workspace, seq, (long long)x.B * x.H, x.T), st, read, fwd, rev);
  } else {
    const int c0 = grp * ga.chunks, c1 = min((x.T + kBackwardChunk - 1) / kBackwardChunk, c0 + ga.chunks);
    two_passes<D>(x.T, c0, c1, W != Walk::Fill, true,
                  Slots<D>(workspace, seq, x.T, ga.scratch + slot * group_scratch_floats(D)), st, read, fwd, rev,
                  W == Walk::Fill);
    if constexpr (W == Walk::Fill) return;
    block_sync<D>();  // the last step's shared writes (dS, dA, P) are done
    float* loc = ga.local + slot * kCarry;
    float* prod = ga.product + slot * D * D;
    for (int c = 0; c < D; ++c) {
      if constexpr (W == Walk::B1) loc[c * D + j] = dS[c * LD + j];
      if constexpr (W == Walk::B2) loc[D * D + c * D + j] = 0.5f * (dA[c * LD + j] + dA[j * LD + c]);
      if constexpr (kProduct) prod[c * D + j] = P[c * LD + j];
    }
    if constexpr (W == Walk::B1) loc[2 * D * D + j] = dzs;
  }
}


// ---------------------------------------------------------------------------------------------------
// Linear attention and DeltaNet: the same two passes and read with S alone (no A; the slots' A half is
// unused). Adjoints: core/rules/linear/adjoint.hpp, core/rules/deltanet/adjoint.hpp.
template <int D> struct DeltaSmem {  // S, dS (padded), 5 vectors, the sums' partials: 132 KiB at d = 128
  static constexpr int VECS = 5, FLOATS = 2 * Smem<D>::MAT + VECS * D + BlockSum<D>::FLOATS;
};

template <RecurrentKind K, int D>
__global__ void __launch_bounds__(D) delta_backward_kernel(const RecurrentTensors x, const RecurrentGrads g,
                                                           const RecurrentParams prm, float* workspace) {
  constexpr bool DELTA = K == RecurrentKind::DeltaNet;
  constexpr int LD = Smem<D>::LD, MAT = Smem<D>::MAT;
  extern __shared__ __align__(16) float sm[];
  float* dS = sm;
  float* v0 = sm + 2 * MAT;
  float *sh_kh = v0, *sh_e = v0 + D, *sh_qf = v0 + 2 * D, *sh_g = v0 + 3 * D, *sh_de = v0 + 4 * D;
  BlockSum<D> sums{v0 + DeltaSmem<D>::VECS * D};

  const int j = threadIdx.x;
  const long long seq = blockIdx.x;
  const bool gated = DELTA && x.g;
  State<D, false> st;
  st.S = dS + MAT;
  st.init(0.f);
  for (int c = 0; c < D; ++c) dS[c * LD + j] = 0.f;
  float dzs = 0.f;
  block_sync<D>();

  struct Vals { float kf, nk, kh, beta, e; };
  // Step t's kf, k_hat, beta, e from S = S_{t-1}; publishes sh_kh (the write key) and sh_e.
  auto prelude = [&](const Tok& in) {
    Vals s;
    s.kf = elu_plus_one(in.k);
    float r1[1] = {s.kf * s.kf};
    sums(r1);  // also the step's opening barrier
    s.nk = sqrtf(r1[0]);
    s.beta = gated ? sigmoid(in.g) : 1.f;  // beta_t = sigmoid(g_t) (eq. 4)
    if constexpr (DELTA) {
      s.kh = s.nk == 0.f ? s.kf : s.kf / s.nk;
      sh_kh[j] = s.kh;
      block_sync<D>();
      s.e = in.v - row_dot<D>(st.S, j, sh_kh);  // e = v - S_{t-1} k_hat
    } else {
      s.kh = s.kf;  // linear attention writes v phi(k)^T (eq. 3)
      s.e = in.v;
      sh_kh[j] = s.kh;
    }
    sh_e[j] = s.e;
    block_sync<D>();
    return s;
  };
  auto fwd = [&](int, const Tok& in, float*) {  // S_t = beta S_{t-1} + e kh^T (column j), zs_t = zs_{t-1} + kf
    const Vals s = prelude(in);
    Bcast4 e4{sh_e};
    walk<D, 4>([&](int c, int r) {
      const float sc = st.S[c * LD + j];
      st.S[c * LD + j] = fmaf(e4(c, r), s.kh, DELTA ? s.beta * sc : sc);
    });
    st.zs += s.kf;
  };
  auto rev = [&](int t, const Tok& in) {
    const long long o = (seq * x.T + t) * D + j;
    const Vals s = prelude(in);
    g.dq[o] = read_adjoint<D>(in.q, in.dout, st.zs + s.kf, s.beta, s.kh, s.e, st.S, dS, sh_qf, sh_g, sums, prm.eps, dzs);
    // Write: de = dS kh (= dv), dkh = dS^T e [- S_{t-1}^T de], dbeta = <dS, S_{t-1}>.
    Acc4 a_de, a_dkh, a_db;  // dS kh (rows), dS^T e (columns), row j of dS . S_{t-1} (DeltaNet)
    walk<D, 4>([&](int c, int r) {
      const float dsr = dS[j * LD + c];
      a_de.add(r, dsr, sh_kh[c]);
      a_dkh.add(r, dS[c * LD + j], sh_e[c]);
      if constexpr (DELTA) a_db.add(r, dsr, st.S[j * LD + c]);
    });
    const float de = a_de.sum();
    float dkh = a_dkh.sum();
    g.dv[o] = de;
    if constexpr (DELTA) {
      sh_de[j] = de;
      float r6[1] = {a_db.sum()};
      sums(r6);  // all reads of dS done before the update below
      if (gated && j == 0) g.dg[seq * x.T + t] = r6[0] * s.beta * (1.f - s.beta);
      Acc4 a_sde;  // S_{t-1}^T de, and dS = beta dS - de kh^T (column j)
      Bcast4 de4{sh_de};
      walk<D, 4>([&](int c, int r) {
        const float dec = de4(c, r);
        a_sde.add(r, st.S[c * LD + j], dec);
        dS[c * LD + j] = s.beta * dS[c * LD + j] - dec * s.kh;
      });
      dkh -= a_sde.sum();
      float r9[1] = {s.kh * dkh};
      sums(r9);
      const float dkf = dzs + (s.nk == 0.f ? 0.f : (dkh - s.kh * r9[0]) / s.nk);
      g.dk[o] = dkf * elu_plus_one_grad(in.k);
    } else {
      g.dk[o] = (dzs + dkh) * elu_plus_one_grad(in.k);
    }
  };
  two_passes<D>(x.T, 0, (x.T + kBackwardChunk - 1) / kBackwardChunk, x.checkpoints != nullptr, false,
                Slots<D>(workspace, seq, (long long)x.B * x.H, x.T),
                st, TokenReader<K, D>{x, g.dout, seq}, fwd, rev);
}

template <RecurrentKind K, int D> cudaError_t launch(const RecurrentTensors& x, const RecurrentGrads& g,
                                                    const RecurrentParams& p, float* ws, cudaStream_t s) {
  const std::size_t bytes = sizeof(float) * (K == RecurrentKind::Vla ? VlaSmem<D, Walk::Sequence>::FLOATS : DeltaSmem<D>::FLOATS);
  auto kernel = [] {
    if constexpr (K == RecurrentKind::Vla) return vla_backward_kernel<D, Walk::Sequence>;
    else return delta_backward_kernel<K, D>;
  }();
  if (bytes > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
    if (e != cudaSuccess) return e;
  }
  if constexpr (K == RecurrentKind::Vla)
    kernel<<<dim3(unsigned(x.B) * unsigned(x.H)), dim3(D), bytes, s>>>(x, g, p, ws, GroupArgs{});
  else
    kernel<<<dim3(unsigned(x.B) * unsigned(x.H)), dim3(D), bytes, s>>>(x, g, p, ws);
  return cudaGetLastError();
}

// One group walk (Fill, B1, B2, B3) over every (sequence, group) at once.
template <int D, Walk W> cudaError_t launch_walk(const RecurrentTensors& x, const RecurrentGrads& g, const RecurrentParams& p,
                                                 float* ws, const GroupArgs& ga, cudaStream_t s) {
  constexpr std::size_t bytes = sizeof(float) * VlaSmem<D, W>::FLOATS;
  if (bytes > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(vla_backward_kernel<D, W>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
    if (e != cudaSuccess) return e;
  }
  vla_backward_kernel<D, W><<<dim3(unsigned(x.B) * unsigned(x.H) * unsigned(ga.groups)), dim3(D), bytes, s>>>(x, g, p, ws, ga);
  return cudaGetLastError();
}

// [Fill,] B1, C1, B2, C2, B3 in stream order (each reads what the one before wrote).
template <int D> cudaError_t launch_groups(const RecurrentTensors& x, const RecurrentGrads& g, const RecurrentParams& p,
                                           float* ws, const GroupArgs& ga, const GroupArgs* fill, cudaStream_t s) {
  const unsigned seqs = unsigned(x.B) * unsigned(x.H);
  cudaError_t e;
  if (fill && (e = launch_walk<D, Walk::Fill>(x, g, p, ws, *fill, s)) != cudaSuccess) return e;
  if ((e = launch_walk<D, Walk::B1>(x, g, p, ws, ga, s)) != cudaSuccess) return e;
  vla_group_chain_kernel<D, 1><<<seqs, kChainThreads, 0, s>>>(ga);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  if ((e = launch_walk<D, Walk::B2>(x, g, p, ws, ga, s)) != cudaSuccess) return e;
  vla_group_chain_kernel<D, 2><<<seqs, kChainThreads, 0, s>>>(ga);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  return launch_walk<D, Walk::B3>(x, g, p, ws, ga, s);
}

// The group-parallel backward's workspace after the checkpoints (GroupArgs): per (sequence, group) slot,
// local and carry (2 d^2 + d each), product (d^2), the token walk's scratch (group_scratch_floats).
long long group_slot_floats(int d) { return 2 * (2LL * d * d + d) + 1LL * d * d + group_scratch_floats(d); }

template <RecurrentKind K>
cudaError_t launch_d(const RecurrentTensors& x, const RecurrentGrads& g, const RecurrentParams& p, float* ws,
                     cudaStream_t s) {
  switch (x.d) {
    case 16: return launch<K, 16>(x, g, p, ws, s);
    case 32: return launch<K, 32>(x, g, p, ws, s);
    case 64: return launch<K, 64>(x, g, p, ws, s);
    case 96: return launch<K, 96>(x, g, p, ws, s);
    case 128: return launch<K, 128>(x, g, p, ws, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

std::size_t vla_group_backward_workspace_floats(int B, int H, int T, int d, int group_tokens) {
  if (B < 1 || H < 1 || T < 1 || d < 1 || group_tokens < kBackwardChunk) return 0;
  const long long seqs = (long long)B * H, groups = (T + group_tokens - 1) / group_tokens;
  return std::size_t(backward_checkpoint_offset(seqs, T, d, 0) + seqs * groups * group_slot_floats(d));
}

int vla_group_backward_tokens(int B, int H, int T, int d) {
  constexpr int CH = kBackwardChunk;
  if (B < 1 || H < 1 || T < 1) return CH;
  // Blocks of B3 (the largest shared memory of the walks but B1 / B2's one matrix more: close enough)
  // resident at once on this device.
  int dev = 0, sms = 1, per_sm = 1;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  auto occupancy = [&](auto kernel, std::size_t bytes) {
    if (bytes > 48 * 1024) cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, d, bytes);
  };
  switch (d) {
    case 16: occupancy(vla_backward_kernel<16, Walk::B1>, sizeof(float) * VlaSmem<16, Walk::B1>::FLOATS); break;
    case 32: occupancy(vla_backward_kernel<32, Walk::B1>, sizeof(float) * VlaSmem<32, Walk::B1>::FLOATS); break;
    case 64: occupancy(vla_backward_kernel<64, Walk::B1>, sizeof(float) * VlaSmem<64, Walk::B1>::FLOATS); break;
    default: break;
  }
  cudaGetLastError();  // a failed query leaves per_sm = 1: a valid, if long, group
  const long long resident = std::max(1LL, (long long)sms * std::max(per_sm, 1));
  const long long chunks = ((long long)B * H * ((T + CH - 1) / CH) + resident - 1) / resident;  // per block, one wave
  return int(std::min<long long>(std::max(1LL, chunks), (T + CH - 1) / CH)) * CH;
}

cudaError_t vla_group_backward(const RecurrentTensors& x, const RecurrentGrads& g, const RecurrentParams& p, int group_tokens,
                               int starts_every, float* workspace, cudaStream_t stream) {
  if (x.B < 1 || x.H < 1 || x.T < 1 || !x.q || !x.k || !x.v || !x.u) return cudaErrorInvalidValue;
  if (!g.dout || !g.dq || !g.dk || !g.dv || !g.du || !workspace) return cudaErrorInvalidValue;
  if (x.checkpoints != workspace) return cudaErrorInvalidValue;  // a forward has written them there
  if (group_tokens < kBackwardChunk || group_tokens % kBackwardChunk != 0) return cudaErrorInvalidValue;
  if (starts_every < 0 || starts_every % kBackwardChunk != 0) return cudaErrorInvalidValue;
  if (!(p.eps <= 1.f)) return cudaErrorInvalidValue;  // a clamped delta would make C2 no congruence
  GroupArgs ga;
  ga.groups = (x.T + group_tokens - 1) / group_tokens;
  ga.chunks = group_tokens / kBackwardChunk;
  const long long seqs = (long long)x.B * x.H, slots = seqs * ga.groups;
  if (slots > 0x7fffffffLL) return cudaErrorInvalidValue;
  float* at = workspace + backward_checkpoint_offset(seqs, x.T, x.d, 0);
  const long long carry = 2LL * x.d * x.d + x.d;
  ga.local = at;
  ga.carry = at + slots * carry;
  ga.product = ga.carry + slots * carry;
  ga.scratch = ga.product + slots * x.d * x.d;
  GroupArgs fill = ga;  // the forward over the given starts' groups (it reads no buffer but the checkpoints)
  fill.groups = starts_every > 0 ? (x.T + starts_every - 1) / starts_every : 1;
  fill.chunks = starts_every / kBackwardChunk;
  if (seqs * fill.groups > 0x7fffffffLL) return cudaErrorInvalidValue;
  const GroupArgs* f = starts_every > 0 ? &fill : nullptr;
  switch (x.d) {
    case 16: return launch_groups<16>(x, g, p, workspace, ga, f, stream);
    case 32: return launch_groups<32>(x, g, p, workspace, ga, f, stream);
    case 64: return launch_groups<64>(x, g, p, workspace, ga, f, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t recurrent_backward(RecurrentKind kind, const RecurrentTensors& x, const RecurrentGrads& g,
                               const RecurrentParams& p, float* workspace, cudaStream_t stream) {
  if (x.B < 1 || x.H < 1 || x.T < 0 || !x.q || !x.k || !x.v) return cudaErrorInvalidValue;
  if (!g.dout || !g.dq || !g.dk || !g.dv || !workspace) return cudaErrorInvalidValue;
  if (kind == RecurrentKind::Vla && (!x.u || !g.du)) return cudaErrorInvalidValue;
  if (kind == RecurrentKind::DeltaNet && x.g && !g.dg) return cudaErrorInvalidValue;
  if ((long long)x.B * x.H > 0x7fffffffLL) return cudaErrorInvalidValue;
  if (x.checkpoints && x.checkpoints != workspace) return cudaErrorInvalidValue;  // the checkpoints live in it
  if (x.T == 0) return cudaSuccess;
  switch (kind) {
    case RecurrentKind::Vla: return launch_d<RecurrentKind::Vla>(x, g, p, workspace, stream);
    case RecurrentKind::Linear: return launch_d<RecurrentKind::Linear>(x, g, p, workspace, stream);
    case RecurrentKind::DeltaNet: return launch_d<RecurrentKind::DeltaNet>(x, g, p, workspace, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace vla::gpu
