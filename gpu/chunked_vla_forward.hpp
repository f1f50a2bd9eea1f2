#pragma once
// The chunkwise-parallel forward of Algorithm 1 (docs/chunkwise-vla.md, equations V1-V5 and P1-P3) on the
// GPU: the same outputs as the fused recurrent kernel (gpu/recurrent_forward.hpp), computed a chunk of C
// tokens at a time with small matrix products, every group of chunks at once, and two chains of one step
// per group (the penalty inverse A by a 32 x 32 solve, the memory S by a 32 x 32 product).
// Plain C++17 (no Eigen): shared by nvcc- and g++-compiled code.
//
// Tensor layout: as gpu/recurrent_forward.hpp (q, k_raw, v, u_raw (B, H, T, d) in, o (B, H, T, d) out,
// fp32 row-major on the device); stats and g are not read, checkpoints only as said below.
// Covers what the fused kernel covers: the `vla` preset, rank 1, the delta clamp of line 13 (exact while it
// does not fire: A stays SPD, so delta_t >= 1 > eps), the refresh of line 16 (chunks end on refresh steps,
// so a chunk holds at most min(C, refresh_period) tokens), no S renormalisation. Every product in fp32
// unless the caller asks for one-pass TF32 products (chunked_vla_forward's `products`).
#include "core/product_operands.hpp"
#include "gpu/recurrent_forward.hpp"  // RecurrentTensors, RecurrentParams

#include <cuda_runtime.h>

#include <cstddef>

namespace vla::gpu {

// Head widths and chunk lengths the kernels are compiled for.
inline constexpr int kChunkedVlaHeads[] = {32};
inline constexpr int kChunkedVlaMaxChunk = 32;
inline constexpr int kChunkedVlaDefaultChunk = 32;
// Refresh segments per group (without a refresh: chunks per group), when the caller leaves it to the
// launch: the group kernels walk their groups one warp each, latency-bound, in waves of the blocks the
// device holds at once (4 warps a block, 2 blocks per SM on an H100), so their time is ~ waves x group
// tokens, and each group adds a step to the two chains, worth ~kChunkedVlaChainStepTokens tokens of a
// walk. The launch takes the group (at most kChunkedVlaMaxGroup) that minimises waves x group tokens +
// kChunkedVlaChainStepTokens x groups: on an H100 at B = 8, H = 4, d = 32, refresh 20, it picks 7, 26 and
// 52 segments at T = 4096, 16384 and 65536, the fastest measured (docs/chunkwise-vla-gpu.md).
inline constexpr double kChunkedVlaChainStepTokens = 3.0;
inline constexpr int kChunkedVlaMaxGroup = 64;
// The penalty chain carries A across groups as a homogeneous pair multiplied by each group's map and
// renormalises it by a solve once per this many segments (chunks without a refresh): the products of up
// to 256 segments keep A within 3-10e-7 of mp50 in float (notebooks-cpp/penalty_chain_groups.cpp), and
// the chain's solves, its slow steps, become T / (128 segments) per sequence whatever the group length.
inline constexpr int kChunkedVlaChainSegments = 128;

// Chunks. A sequence of T tokens is cut into chunks of C tokens (C = chunked_vla_chunk) that end on refresh
// steps, as core/rules/vla/chunked.hpp cuts them. Chunk start c0 -> its length: C tokens, fewer at the end
// of the sequence or before the next refresh (line 16 after the steps with (t + 1) mod period == 0).
__host__ __device__ inline int chunk_length(int c0, int T, int C, int period) {
  int n = C < T - c0 ? C : T - c0;
  if (period > 0 && period - c0 % period < n) n = period - c0 % period;
  return n;
}
// The chunk holding token t, and chunk i's first token (C <= period when period > 0: every refresh segment
// holds ceil(period / C) chunks). A sequence holds chunk_of(T - 1) + 1 chunks.
__host__ __device__ inline int chunk_of(int t, int C, int period) {
  return period > 0 ? (t / period) * ((period + C - 1) / C) + (t % period) / C : t / C;
}
__host__ __device__ inline int chunk_start(int i, int C, int period) {
  if (period <= 0) return i * C;
  const int per = (period + C - 1) / C;
  return (i / per) * period + (i % per) * C;
}

// The chunk length a request runs with: `chunk` (1..kChunkedVlaMaxChunk; 0 asks for the default),
// cut to the refresh period when there is one (chunks end on refresh steps).
int chunked_vla_chunk(int chunk, const RecurrentParams& p);

// Segments per group a launch of `seqs` sequences of T tokens runs with on the current device: `group`
// when positive, else the choice above; with `checkpoints` (x.checkpoints set, below) chosen among groups
// of a whole number of kBackwardChunk tokens.
int chunked_vla_group(int chunk, int group, const RecurrentParams& p, int seqs, int T, bool checkpoints = false);
// The same group in tokens: what vla_group_backward (gpu/recurrent_backward.hpp) takes after a forward
// with checkpoints.
int chunked_vla_group_tokens(int chunk, int group, const RecurrentParams& p, int seqs, int T, bool checkpoints = false);

// The parts a launch of `seqs` sequences runs in (1 .. kChunkedVlaMaxParts): as many as the waves of whole
// sequences that the group kernels' blocks fill on the current device. Each part, a contiguous range of
// sequences, runs on a stream of its own (the caller's stream the first; the others fork from it and join it
// again before the launch returns), its phases launched after the previous part's, so that one part's chains
// (one block per sequence) run beside the next part's group kernels. Each sequence's results are the same bits
// whatever the parts.
inline constexpr int kChunkedVlaMaxParts = 4;
int chunked_vla_parts(int chunk, int group, const RecurrentParams& p, int seqs, int T, bool checkpoints = false);

// Floats of the chunk_starts buffer below: B H chunks of slots of 2 d^2 + d floats (0 for an invalid request).
std::size_t chunked_vla_chunk_starts_floats(int B, int H, int T, int chunk, const RecurrentParams& p);

// Floats of the workspace below for the same B, H, T, chunk, group, p and checkpoints (x.checkpoints set) on the
// current device: 37 KB per (sequence, group) + 2 B H T d 4 bytes (0 for an invalid request).
std::size_t chunked_vla_forward_workspace_floats(int B, int H, int T, int chunk, int group, const RecurrentParams& p,
                                                 bool checkpoints = false);

// Launches the chunked forward on `stream` (seven kernels per part, above). With x.checkpoints set, an eighth
// writes the state (S, A, z) before every group into it, in the backward's checkpoint layout
// (backward_checkpoint_offset, gpu/recurrent_forward.hpp): what vla_group_backward starts from. Returns the
// first launch or allocation error, or cudaErrorInvalidValue, launching nothing, for a d outside
// kChunkedVlaHeads, a chunk outside 0..kChunkedVlaMaxChunk, a negative group, a missing q, k, v, u or o, a
// non-positive B, H or T, or p.normalise_key false (vla-no-knorm: the fused kernel's), or p.eps above 1
// (where line 13's clamp could fire on finite inputs, which the chunk form does not reproduce), or
// x.checkpoints with a group that is not a whole number of kBackwardChunk tokens.
// chunk_starts (optional, chunked_vla_chunk_starts_floats floats): the state (S, A, z) before every chunk, in
// slots of the checkpoints' layout (S, A row-major, then z), sequence seq's chunk i at slot seq chunks + i:
// what the chunk-form backward (gpu/chunked_vla_backward.hpp) starts each chunk from. A is written as the
// forward carries it (symmetric up to the rounding of its products).
// products: how a chunk's tensor-core products read their operands (core/product_operands.hpp): Full (3xTF32,
// as accurate as fp32 FMAs) or Tf32 (one pass, each operand rounded to 11 significant bits; the chains,
// group_maps, factorisations, sweeps and norms stay in fp32 either way). Any other value:
// cudaErrorInvalidValue.
// workspace (optional): workspace_floats floats (at least chunked_vla_forward_workspace_floats; fewer:
// cudaErrorInvalidValue, nothing launched), which the launch uses and leaves allocated. Without one it takes
// a stream-ordered allocation (cudaMallocAsync) and frees it on the stream; the device's default pool returns
// that memory at every synchronisation (its release threshold is 0 unless the caller raises it), so a call
// after one maps it again, 12-26% of the launch's time at B H = 32 on an H100 (docs/chunkwise-vla-gpu.md,
// "The workspace"). Repeated launches (benchmarks, training) pass one, or raise that threshold
// (cudaMemPoolAttrReleaseThreshold), which the library leaves as the caller set it.
cudaError_t chunked_vla_forward(const RecurrentTensors& x, const RecurrentParams& p, int chunk = 0, int group = 0,
                                cudaStream_t stream = nullptr, float* chunk_starts = nullptr,
                                ProductOperands products = ProductOperands::Full, float* workspace = nullptr,
                                std::size_t workspace_floats = 0);

}  // namespace vla::gpu
