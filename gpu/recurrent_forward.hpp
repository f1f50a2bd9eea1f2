#pragma once
// Fused forward kernels of the recurrent mixers (VLA Algorithm 1, linear attention, DeltaNet) on
// already-projected per-token inputs. One launch covers all T steps; one thread block owns one
// (batch, head) sequence and keeps its state (S, and A for VLA) in registers for the whole sequence.
// Plain C++17 (no Eigen): this header is shared by nvcc-compiled and g++-compiled code.
//
// Tensor layout (all fp32, row-major, on the device):
//   q, k, v   (B, H, T, d)   W_q x + b_q, the raw key k_raw, W_v x + b_v
//   u         (B, H, T, d)   VLA only: u_raw = W_u k_raw + b_u (rank 1)
//   g         (B, H, T)      DeltaNet only: gate logit, beta = sigmoid(g); null = ungated (beta = 1)
//   o         (B, H, T, d)   output, eq. (11)
//   stats     (B, H, T, 3)   optional (null = off): ||S_t||_F, ||A_t||_F, delta_t (NaN where a rule has none)
//   checkpoints              optional (null = off): a recurrent_backward workspace
//                            (gpu/recurrent_backward.hpp); the forward writes into it the backward's
//                            checkpoints, so that the backward can skip its own first forward pass
#include "core/rules/gpu_kernel.hpp"  // RecurrentKind, RecurrentParams: each rule's GPU trait fills them

#include <cuda_runtime.h>

namespace vla::gpu {

// The backward's checkpoints (gpu/recurrent_backward.hpp): the state (S, A, z) before every
// kBackwardChunk-th step, in slots of 2 d^2 + d floats (S row-major d x d, A row-major d x d, z: d).
// A sequence's workspace holds its ceil(T / kBackwardChunk) checkpoints, then kBackwardChunk scratch
// slots; sequence seq = b H + h. Here, not in the backward's header, because the forward writes them too.
inline constexpr int kBackwardChunk = 32;
__host__ __device__ constexpr long long backward_slot_floats(int d) { return 2LL * d * d + d; }
// Offset (floats) of sequence seq's checkpoint c (the state before step c kBackwardChunk) in a workspace.
__host__ __device__ constexpr long long backward_checkpoint_offset(long long seq, int T, int d, long long c) {
  return (seq * ((T + kBackwardChunk - 1) / kBackwardChunk + kBackwardChunk) + c) * backward_slot_floats(d);
}

struct RecurrentTensors {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  const float* u = nullptr;  // VLA
  const float* g = nullptr;  // DeltaNet (optional)
  float* o = nullptr;
  float* stats = nullptr;    // optional
  // Optional: forward, a workspace to write the backward's checkpoints into; backward, the workspace
  // itself, saying that the forward has written them (recurrent_backward then skips its first pass).
  float* checkpoints = nullptr;
  int B = 0, H = 0, T = 0, d = 0;
};

// Launches the fused forward on `stream`. Returns the launch's error (cudaGetLastError after the
// launch) or cudaErrorInvalidValue for an unsupported d (allowed: 16, 32, 64, 96, 128) or a missing input.
cudaError_t recurrent_forward(RecurrentKind kind, const RecurrentTensors& x, const RecurrentParams& p,
                              cudaStream_t stream = nullptr);

// Fills n floats with deterministic pseudo-random values, uniform on [-sqrt(3), sqrt(3)] (unit
// variance), from a counter-based hash of (seed, index): for benchmarks and tests that need large
// random inputs without a host round trip.
cudaError_t fill_random(float* x, long long n, unsigned long long seed, cudaStream_t stream = nullptr);

}  // namespace vla::gpu
