#pragma once
// Fused backward of the VLA recurrence (Algorithm 1, "vla" preset, rank 1, delta clamp), linear
// attention and DeltaNet on the already-projected per-token inputs of gpu/recurrent_forward.hpp: given
// the forward inputs and dL/do, it produces dL/dq_raw, dL/dk_raw, dL/dv, and dL/du_raw (VLA) or dL/dg
// (gated DeltaNet). One launch, one thread block per (b, h). The adjoint equations and the CPU reference
// are the rules' own (core/rules/<rule>/adjoint.hpp, run by core/model/head.hpp); the design
// (recompute from checkpoints, not step inversion) in gpu/recurrent_backward.cu and docs/gpu.md.
// Plain C++17 (no Eigen): shared by nvcc- and g++-compiled code.
//
// Tensor layout (fp32, row-major, on the device), as the forward's:
//   x.q, x.k, x.v, x.u   (B, H, T, d)   forward inputs (x.u: VLA; x.o, x.stats are not read)
//   x.g                  (B, H, T)      DeltaNet gate logits, or null (ungated)
//   g.dout               (B, H, T, d)   dL/do
//   g.dq, g.dk, g.dv, g.du (B, H, T, d) outputs, every element written (g.du: VLA only)
//   g.dg                 (B, H, T)      gated DeltaNet only
//   workspace            recurrent_backward_workspace_floats(...) floats, scratch (checkpoints)
//   x.checkpoints        null: the backward makes its checkpoints itself (a forward pass over all T
//                        steps first). Or == workspace: recurrent_forward has just run with the same x,
//                        params and x.checkpoints == workspace and left them there; that pass is skipped.
#include "gpu/recurrent_forward.hpp"

#include <cstddef>

namespace vla::gpu {

struct RecurrentGrads {
  const float* dout = nullptr;
  float* dq = nullptr;
  float* dk = nullptr;
  float* dv = nullptr;
  float* du = nullptr;  // VLA: dL/du_raw
  float* dg = nullptr;  // DeltaNet with a gate (x.g set): dL/dg, (B, H, T)
};

// Per step of a re-run chunk, besides its state slot, the forward quantities of the step that its
// reverse step reads instead of recomputing them: z, alpha_hat, e (d each) and the step's four scalars
// (||phi(k)||, ||u_raw||, delta, ||alpha||), each thread its own copy: kBackwardStepValues d floats.
inline constexpr int kBackwardStepValues = 7;
__host__ __device__ constexpr long long backward_step_values_floats(int d) { return (long long)kBackwardStepValues * d; }

// Floats of device scratch the backward needs for (B, H, T, d): per sequence, one (S, A, z)
// checkpoint every kBackwardChunk steps plus one chunk of per-step (S_{t-1}, A_{t-1}, z_{t-1})
// (layout: backward_checkpoint_offset, gpu/recurrent_forward.hpp), then, after every sequence's
// slots, each sequence's kBackwardChunk steps of step values.
inline std::size_t recurrent_backward_workspace_floats(int B, int H, int T, int d) {
  const long long seqs = (long long)B * H;
  return std::size_t(backward_checkpoint_offset(seqs, T, d, 0) + seqs * kBackwardChunk * backward_step_values_floats(d));
}

// Launches the fused backward on `stream`. d in {16, 32, 64, 96, 128}; anything else returns
// cudaErrorInvalidValue (a missing pointer too, or x.checkpoints neither null nor workspace) without launching. d = 128 needs the H100's opt-in
// shared memory (VLA 199 KiB, linear / DeltaNet 132 KiB per block).
cudaError_t recurrent_backward(RecurrentKind kind, const RecurrentTensors& x, const RecurrentGrads& g,
                               const RecurrentParams& p, float* workspace, cudaStream_t stream = nullptr);

// The same VLA backward over groups of `group_tokens` tokens at once (docs/chunkwise-vla.md, "The backward
// across groups"; CPU reference core/rules/vla/chunked_adjoint.hpp): every group's reverse walk runs in
// parallel, three times (B1, B2, B3: one block per (b, h, group)), with two chains of d x d products
// across groups between them (C1, C2: one block per (b, h)). The same gradients as recurrent_backward in
// exact arithmetic. It starts from a forward's checkpoints in the layout above, x.checkpoints == workspace:
// either all of them (recurrent_forward with x.checkpoints set; starts_every = 0) or only those at every
// starts_every-th token (chunked_vla_forward with x.checkpoints set, gpu/chunked_vla_forward.hpp: its
// group start, chunked_vla_group_tokens; a first launch runs the forward over each such span from its
// start and writes the rest). workspace: vla_group_backward_workspace_floats(B, H, T, d, group_tokens)
// floats. cudaErrorInvalidValue, nothing launched: group_tokens not a positive multiple of
// kBackwardChunk, starts_every not a non-negative one, d outside {16, 32, 64}, eps above 1 (a clamped
// delta_t makes the dA chain no congruence), x.checkpoints != workspace, a missing pointer.
std::size_t vla_group_backward_workspace_floats(int B, int H, int T, int d, int group_tokens);
cudaError_t vla_group_backward(const RecurrentTensors& x, const RecurrentGrads& g, const RecurrentParams& p, int group_tokens,
                               int starts_every, float* workspace, cudaStream_t stream = nullptr);
// The group length that fills the current device in one wave: the walks are latency-bound sequential
// chains (a block walks its group token by token), so the shortest groups that keep every resident block
// slot busy, and no shorter (each group adds a step to the chains): ceil(B H T / (32 resident)) chunks of 32
// tokens, resident = SMs x the walk kernel's blocks per SM at d (an occupancy query).
int vla_group_backward_tokens(int B, int H, int T, int d);

}  // namespace vla::gpu
