#pragma once
// C = A B + beta C in fp32 accuracy on the tensor cores (3xTF32), for the training step's dense projections.
//
// Contract. C (M x N) is row-major; A (M x K) and B (K x N) are each read row-major or column-major
// (MatrixLayout: element (r, c) of an R x C operand at r C + c, or at c R + r), so the linear layer's three
// products need no transpose: y = x W^T (A = x row-major, B = W^T column-major), dW += dy^T x (A = dy^T
// column-major, B = x row-major), dx = dy W (both row-major). Any M, N, K >= 1 that are multiples of 4, M at
// most 65535 x 64 (the row tiles of one launch), with every pointer 16-byte aligned (gemm_3xtf32_serves);
// anything else returns cudaErrorInvalidValue and launches nothing, and the caller takes cuBLAS SGEMM.
//
// Accuracy. Each operand is split once into a TF32 head and its remainder and a b is summed as
// a_lo b_hi + a_hi b_lo + a_hi b_hi, each k block of 8 summed from zero on the tensor core and added to the
// running sum in fp32 (the chunked VLA kernels' scheme, docs/chunkwise-vla-gpu.md): every operand is taken to
// 2^-21 of itself and the sums round as fp32 sums do. Measured against float64 at the training step's shapes
// (gpu/dev/gemm_3xtf32_probe.cu, docs/gpu.md): 1.5e-7 .. 4.9e-7 of max |C|, where SGEMM reads 2.3e-7 .. 1.0e-6.
// Range: the split multiplies by 8193, so an operand entry that is infinite or beyond FLT_MAX / 8193 (~4.2e34)
// in magnitude splits into NaN and every product that reads it is NaN, where SGEMM would give a finite or
// infinite value: a non-finite result either way, never a finite wrong one (the training loop stops at a
// non-finite loss or gradient, naming the step; a sweep records the run as diverged).
//
// Epilogue (GemmEpilogue, each part optional): a bias added to every row of C (the linear layer's
// y = x W^T + b, added after beta C + A B, as a separate bias kernel would), and A's rows summed over k into
// a vector (db += sum_n dy when A = dy^T: the bias gradient, read from the tiles dW's product loads anyway).
// A row's sum runs in k order within a slice, the slices added in order: fp32 sums of at most a slice's
// length plus the slice count.
//
// Head-major matrices (GemmHeads). The training step's q, k, v, u, o and their gradients are logical
// (B T) x (H d) matrices, row (b, t) and column (h, j), that the recurrent kernels keep as (B, H, T, d). A
// product reads such an operand, or writes such a C, in place: entry (r, c) at ((b H + h) T + t) d + j with
// b = r / T, t = r % T, h = c / d, j = c % d, so no permute runs before or after it. For
// A and B this describes the matrix as stored: a row-major A (M x K) has the tokens as its rows, a
// column-major one is stored K x M with the tokens as the stored rows; likewise B. The arithmetic is the
// dense product's: the same inputs give the same bits whichever way they are stored. Several such tensors
// side by side (groups: q, k, v as one (B T) x (3 H d) matrix) are read or written as one matrix, tensor g in
// columns [g H d, (g + 1) H d), each (B, H, T, d), one after another in memory. The contract adds: the stored
// rows a multiple of T, the columns of groups x d, and d a multiple of 4 (a float4 never straddles two heads).
//
// Determinism. A long reduction (K, e.g. dW's sum over the batch's tokens) is split over blocks by a rule of
// (M, N, K) alone; the slices' partial products go to `workspace` and a second launch adds them in slice
// order. Same inputs, same bits, on any GPU.
#include <cstddef>

#include <cuda_runtime.h>

namespace vla::gpu {

enum class MatrixLayout { RowMajor, ColMajor };

struct GemmEpilogue {
  const float* bias = nullptr;  // (N) or null: C[m][n] += bias[n], after beta C + A B
  float* a_row_sums = nullptr;  // (M) or null: a_row_sums[m] += sum over k of A[m][k]
};

// A matrix of per-token head vectors stored head-major (above): T tokens per sequence, heads of width d,
// `groups` tensors side by side. T = 0: stored as its MatrixLayout says (dense).
struct HeadMajor {
  int T = 0, d = 0, groups = 1;
  bool on() const { return T > 0; }
};
struct GemmHeads {
  HeadMajor a, b, c;  // A and B as stored; C (M x N, row-major)
};

// Whether gemm_3xtf32 takes this product (shape, alignment, the head-major matrices' extents), and the
// workspace it needs (floats, 16-byte aligned; 0 when K is not split).
bool gemm_3xtf32_serves(int M, int N, int K, const void* A, const void* B, const void* C, MatrixLayout a_layout = MatrixLayout::RowMajor,
                        MatrixLayout b_layout = MatrixLayout::RowMajor, const GemmHeads& heads = {});
std::size_t gemm_3xtf32_workspace_floats(int M, int N, int K);
// Whether it is the faster of it and cuBLAS SGEMM on an H100 (gpu/dev/gemm_3xtf32_probe.cu, docs/gpu.md): at
// the training step's shapes it is, but for a reduction over more than kGemm3xTf32MaxFasterK (dW over many
// tokens: 0.80-0.93x SGEMM's speed from 25600 tokens on, 1.05-1.3x at 6208).
inline constexpr int kGemm3xTf32MaxFasterK = 16384;
inline bool gemm_3xtf32_faster(int /*M*/, int /*N*/, int K) { return K <= kGemm3xTf32MaxFasterK; }

// workspace holds workspace_floats floats; fewer than gemm_3xtf32_workspace_floats(M, N, K) is refused.
cudaError_t gemm_3xtf32(MatrixLayout a_layout, MatrixLayout b_layout, int M, int N, int K, const float* A, const float* B, float beta,
                        float* C, const GemmEpilogue& epilogue, float* workspace, std::size_t workspace_floats, cudaStream_t stream,
                        const GemmHeads& heads = {});

}  // namespace vla::gpu
