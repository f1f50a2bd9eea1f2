#pragma once
// The backward of the chunkwise-parallel VLA forward in the chunk form: the adjoint of (V1)-(V5), chunk by
// chunk, as matrix products, triangular solves and the adjoint of each chunk's L D L^T (docs/chunkwise-vla.md,
// "The backward in the chunk form", (A1)-(A7); CPU reference core/rules/vla/chunkwise_adjoint.hpp), over
// groups of chunks walked at once with the two chains across groups of the token-walk backward ("The backward
// across groups": (B1), (C1), (B2), (C2), (B3); gpu/group_chain.cuh). The same dq_raw, dk_raw, dv, du_raw as
// recurrent_backward in exact arithmetic; no per-token state: each chunk starts from the state the chunked
// forward left before it (chunked_vla_forward's chunk_starts).
// Plain C++17 (no Eigen): shared by nvcc- and g++-compiled code.
//
// Tensor layout: as gpu/recurrent_backward.hpp (x.q, x.k, x.v, x.u and g.dout in, g.dq, g.dk, g.dv, g.du out,
// (B, H, T, d) fp32 row-major on the device; x.o, x.stats, x.checkpoints not read). Covers what the chunked
// forward covers: d = 32, the `vla` preset with key normalisation, rank 1, eps <= 1 (the pivots are the
// unclamped delta_t), the refresh of line 16, chunks of 1..kChunkedVlaMaxChunk tokens cut at the refresh.
#include "gpu/chunked_vla_forward.hpp"
#include "gpu/recurrent_backward.hpp"  // RecurrentGrads

#include <cstddef>

namespace vla::gpu {

// The group length (tokens) the backward runs with when the caller leaves it (group_tokens = 0): a whole
// number of refresh segments (chunks without a refresh), the shortest that keeps every resident block of the
// walk kernels busy in one wave (the walks are latency-bound: each block walks its group chunk by chunk).
int chunked_vla_backward_group_tokens(int chunk, const RecurrentParams& p, int B, int H, int T);

// Floats of device scratch for groups of group_tokens tokens (0: chunked_vla_backward_group_tokens): per
// (sequence, group) the chains' buffers, 5 d^2 + 2 d floats (gpu/group_chain.cuh), and per chunk what B1 leaves
// of its forward of the chunk for B2 and B3 (4 C' d + 4 C'^2 + 4 C' floats, C' the compiled chunk rows:
// 16, 20 or 32; ~17 KB per chunk of 20 tokens, 1.8 GB at B H = 32, T = 65536).
std::size_t chunked_vla_backward_workspace_floats(int chunk, const RecurrentParams& p, int B, int H, int T, int group_tokens = 0);

// Launches the backward on `stream`: five launches (B1, C1, B2, C2, B3). chunk_starts: what
// chunked_vla_forward(x, p, chunk, ..., chunk_starts) wrote for the same inputs and chunk. Returns the first
// launch error, or cudaErrorInvalidValue, launching nothing, for a d other than 32, a missing pointer, a chunk
// outside 0..kChunkedVlaMaxChunk, a group_tokens that is negative or not a whole number of refresh segments
// (chunks without a refresh), p.normalise_key false, or p.eps above 1.
cudaError_t chunked_vla_backward(const RecurrentTensors& x, const RecurrentGrads& g, const RecurrentParams& p, int chunk,
                                 int group_tokens, const float* chunk_starts, float* workspace, cudaStream_t stream = nullptr);

}  // namespace vla::gpu
