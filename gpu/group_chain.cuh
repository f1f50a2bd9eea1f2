#pragma once
// The two chains across groups of VLA's group-parallel backward ((C1), (C2) of docs/chunkwise-vla.md, "The
// backward across groups") and the per-group buffers they read and write. Shared by the backward whose
// group walks run token by token (gpu/recurrent_backward.cu, vla_group_backward) and the one whose walks run
// chunk by chunk in the matrix form (gpu/chunked_vla_backward.cu): whatever walks a group, it leaves the
// same dS^0_a, dz^0_a, R_g (B1) and sym(dA^0_a), Phi_g (B2), and the chains give every group its carry.
// CUDA source: included by .cu files only.
#include <cuda_runtime.h>

namespace vla::gpu::group_chain {

// The group-parallel backward's buffers, per (sequence, group) slot seq G + g:
//   local   (2 d^2 + d)  what B1 / B2 leave at the group's start: B1 dS^0_a (d x d) and dz^0_a (d, at 2 d^2),
//                        B2 sym(dA^0_a) (d x d, at d^2)
//   product (d^2)        R_g (B1), then Phi_g (B2)
//   carry   (2 d^2 + d)  the true carry at the group's end b: dS_b, Sigma_b, dz_b (zero for the last group)
//   scratch              the token walks' CH per-step slots (the chunk walks need none)
// Matrices row-major.
struct GroupArgs {
  int groups = 1;       // per sequence
  int chunks = 1;       // kBackwardChunk-chunks per group (group tokens / kBackwardChunk)
  float* local = nullptr;
  float* product = nullptr;
  float* carry = nullptr;
  float* scratch = nullptr;
};

// The chains across groups (C1, C2 of docs/chunkwise-vla.md), one block per sequence, last group first.
// The carry at the last group's end is zero; then, group g = [a, b) giving the carry at a, which is the
// carry at the end of group g - 1:
//   C1 (after B1): dS_a = dS_b R_g + dS^0_a, dz_a = dz_b + dz^0_a
//   C2 (after B2): Sigma_a = Phi_g^T Sigma_b Phi_g + sym(dA^0_a)
// Thread e (of kChainThreads) owns entries e, e + kChainThreads, ... of the d x d result.
constexpr int kChainThreads = 1024;
// next = X Y (kXt: X^T Y) at the entries e0, e0 + kChainThreads, ... of a d x d result; X and Y in shared
// memory with row stride d + 1. C1 takes cur P, C2 cur P and then P^T cur.
template <int D, int E, bool kXt>
__device__ __forceinline__ void chain_product(float (&next)[E], const float* X, const float* Y, int e0) {
  constexpr int LD = D + 1;
#pragma unroll
  for (int n = 0; n < E; ++n) {
    const int e = e0 + n * kChainThreads, r = e / D, c = e % D;
    if (e >= D * D) break;
    float a = 0.f;
#pragma unroll 8
    for (int k = 0; k < D; ++k) a = fmaf(kXt ? X[k * LD + r] : X[r * LD + k], Y[k * LD + c], a);
    next[n] = a;
  }
}
// A chain step waits on nothing from global memory: the next group's product and local term are loaded a
// group ahead into registers, and dz stays in a register (thread i < d owns dz_i).
template <int D, int kPass>
__global__ void __launch_bounds__(kChainThreads) vla_group_chain_kernel(const GroupArgs ga) {
  constexpr int LD = D + 1, E = (D * D + kChainThreads - 1) / kChainThreads;
  constexpr long long kCarry = 2LL * D * D + D;
  __shared__ float cur[D * LD], P[D * LD];
  const int e0 = threadIdx.x;
  const long long seq = blockIdx.x;
  const int part = kPass == 1 ? 0 : D * D;  // the carry's dS or Sigma
  for (int e = e0; e < D * D; e += kChainThreads) {
    cur[(e / D) * LD + e % D] = 0.f;
    ga.carry[(seq * ga.groups + ga.groups - 1) * kCarry + part + e] = 0.f;
  }
  float dz = 0.f;  // kPass 1, thread e0 < D: dz_b, zero after the last group
  if (kPass == 1 && e0 < D) ga.carry[(seq * ga.groups + ga.groups - 1) * kCarry + 2 * D * D + e0] = 0.f;
  auto store_cur = [&](const float (&next)[E]) {
#pragma unroll
    for (int n = 0; n < E; ++n) {
      const int e = e0 + n * kChainThreads;
      if (e >= D * D) break;
      cur[(e / D) * LD + e % D] = next[n];
    }
  };
  // Group g's product entries and local terms of this thread (and its dz^0_a), loaded a group ahead.
  float p_next[E], loc_next[E], dz_next = 0.f;
  const auto load_group = [&](int g) {
    const long long at = seq * ga.groups + g;
#pragma unroll
    for (int n = 0; n < E; ++n) {
      const int e = e0 + n * kChainThreads;
      if (e >= D * D) break;
      p_next[n] = ga.product[at * D * D + e];
      loc_next[n] = ga.local[at * kCarry + part + e];  // dS^0_a, or sym(dA^0_a)
    }
    if (kPass == 1 && e0 < D) dz_next = ga.local[at * kCarry + 2 * D * D + e0];
  };
  if (ga.groups > 1) load_group(ga.groups - 1);
  for (int g = ga.groups - 1; g >= 1; --g) {
    const long long at = seq * ga.groups + g;
    float* out = ga.carry + (at - 1) * kCarry;
    float loc[E];
#pragma unroll
    for (int n = 0; n < E; ++n) {
      const int e = e0 + n * kChainThreads;
      if (e >= D * D) break;
      P[(e / D) * LD + e % D] = p_next[n];
      loc[n] = loc_next[n];
    }
    const float dz_local = dz_next;
    if (g > 1) load_group(g - 1);
    __syncthreads();  // P and cur written
    float next[E];
    chain_product<D, E, false>(next, cur, P, e0);  // C1: dS_b R_g; C2: Sigma_b Phi_g
    if constexpr (kPass == 2) {                     // cur <- Sigma_b Phi_g, then next = Phi_g^T cur
      __syncthreads();
      store_cur(next);
      __syncthreads();
      chain_product<D, E, true>(next, P, cur, e0);
    }
#pragma unroll
    for (int n = 0; n < E; ++n) {
      const int e = e0 + n * kChainThreads;
      if (e < D * D) next[n] += loc[n];  // + dS^0_a, or + sym(dA^0_a)
    }
    __syncthreads();  // every read of cur and P done
    store_cur(next);
#pragma unroll
    for (int n = 0; n < E; ++n) {
      const int e = e0 + n * kChainThreads;
      if (e < D * D) out[part + e] = next[n];
    }
    if (kPass == 1 && e0 < D) {  // dz_a = dz_b + dz^0_a
      dz += dz_local;
      out[2 * D * D + e0] = dz;
    }
  }
}

}  // namespace vla::gpu::group_chain
