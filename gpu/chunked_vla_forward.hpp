#pragma once
// The chunkwise-parallel forward of Algorithm 1 (docs/chunkwise-vla.md, equations V1-V5) on the GPU: the
// same outputs as the fused recurrent kernel (gpu/recurrent_forward.hpp), computed a chunk of C tokens at
// a time with small matrix products and three short triangular sweeps, instead of T dependent steps.
// Plain C++17 (no Eigen): shared by nvcc- and g++-compiled code.
//
// Tensor layout: as gpu/recurrent_forward.hpp (q, k_raw, v, u_raw (B, H, T, d) in, o (B, H, T, d) out,
// fp32 row-major on the device); stats, checkpoints and g are not read.
// Covers what the fused kernel covers: the `vla` preset, rank 1, the delta clamp of line 13, the
// refresh of line 16 (chunks end on refresh steps, so a chunk holds at most min(C, refresh_period)
// tokens), no S renormalisation.
#include "gpu/recurrent_forward.hpp"  // RecurrentTensors, RecurrentParams

#include <cuda_runtime.h>

namespace vla::gpu {

// The operands of the kernel's tensor-core products (the small triangular parts always run in fp32):
//   Fp32  each fp32 operand as a sum of two TF32 numbers, three MMAs per product ("3xTF32"): fp32 accuracy
//   Tf32  operands rounded to TF32 (10-bit mantissa), one MMA: faster, ~1e-3 relative error
enum class ChunkedVlaOperands { Fp32, Tf32 };

// Head widths and chunk lengths the kernel is compiled for.
inline constexpr int kChunkedVlaHeads[] = {32};
inline constexpr int kChunkedVlaMaxChunk = 32;

// The chunk length a request runs with: `chunk` (1..kChunkedVlaMaxChunk; 0 asks for the default, 32),
// cut to the refresh period when there is one (chunks end on refresh steps).
int chunked_vla_chunk(int chunk, const RecurrentParams& p);

// Launches the chunked forward on `stream`: one thread block per (b, h) sequence walks its T / C chunks.
// Returns the launch's error (cudaGetLastError after the launch), or cudaErrorInvalidValue, launching
// nothing, for a d outside kChunkedVlaHeads, a chunk outside 0..kChunkedVlaMaxChunk, a missing q, k, v,
// u or o, or a non-positive B, H or T.
cudaError_t chunked_vla_forward(const RecurrentTensors& x, const RecurrentParams& p, int chunk = 0,
                                ChunkedVlaOperands ops = ChunkedVlaOperands::Fp32, cudaStream_t stream = nullptr);

}  // namespace vla::gpu
