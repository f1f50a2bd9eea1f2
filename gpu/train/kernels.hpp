#pragma once
// Element-wise and reduction kernels of the GPU training step (gpu/train/model.cpp): embedding,
// LayerNorm, GELU, head permutes, softmax cross-entropy, gradient norm, AdamW. Dense projections are
// gpu/gemm_3xtf32.hpp or cuBLAS (model.cpp); the recurrences are gpu/recurrent_{forward,backward}. All fp32, row-major;
// N = B * T rows. Every launcher returns cudaGetLastError() after its launch. Plain C++17 (no Eigen).
// Each layer mirrors core/model/*.hpp's forward and backward (the CPU reference): same formulas,
// same constants (LayerNorm eps 1e-5, GELU tanh form), so the gradient-parity test compares like with like.
#include <cuda_runtime.h>

#include <cstddef>

namespace vla::gpu::train {

// X (N, d) = tok[tokens[n]] + pos[n % T]; tok (V, d), pos (max_len, d).
cudaError_t embed_forward(const int* tokens, const float* tok, const float* pos, int N, int T, int d, float* X, cudaStream_t s);
// dtok (V, d) += sum over n with tokens[n] == v of dX[n], from the batch's positions grouped by token
// (token_positions: the n with tokens[n] == v at [token_starts[v], token_starts[v + 1]), ascending): one
// thread per (v, column) adds its token's rows in ascending n, a fixed order (no atomics), N d loads in all.
cudaError_t embed_backward_tokens(const int* token_positions, const int* token_starts, const float* dX, int d, int V, float* dtok,
                                  cudaStream_t s);
// Y = g * xhat + b, xhat = (x - mean) rstd, rstd = 1/sqrt(var + 1e-5) (core/model/layernorm.hpp). xhat (N, d), rstd (N).
cudaError_t layernorm_forward(const float* X, const float* g, const float* b, int N, int d, float* Y, float* xhat, float* rstd, cudaStream_t s);
// dX (+)= rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), dxhat = dY g; accumulate: dX += instead of =.
// dg += sum_n dY xhat, db += sum_n dY (column_sums' order: deterministic). scratch: column_sums_scratch_floats(N, d).
cudaError_t layernorm_backward(const float* dY, const float* g, const float* xhat, const float* rstd, int N, int d, float* dX,
                               bool accumulate, float* dg, float* db, float* scratch, cudaStream_t s);
// db (n_cols) += sum over rows of dY (N, n_cols) (row-major). The rows are cut into splits (enough 32 x 32
// column tiles to fill the GPU twice over, at least 64 rows each); within a split 32 strided partial sums
// per column meet in a fixed tree, then the splits are added in order: a fixed order for given (N, n_cols),
// deterministic, no atomics. scratch: column_sums_scratch_floats(N, n_cols) floats (the per-split sums).
cudaError_t column_sums(const float* dY, int N, int n_cols, float* db, float* scratch, cudaStream_t s);
std::size_t column_sums_scratch_floats(int N, int n_cols);
// out (H blocks of dh x dh, row-major, block h at h dh^2) += the diagonal blocks of full (H dh x H dh,
// row-major): out_h[r][c] += full[(h dh + r) H dh + h dh + c]. A per-head weight gradient taken from one dense
// GEMM, which splits its long sum over blocks (a batch of per-head GEMMs gets one block each).
cudaError_t add_diagonal_blocks(const float* full, int H, int dh, float* out, cudaStream_t s);
// W (H dh x H dh, row-major) = the block-diagonal matrix of the H blocks (dh x dh, row-major, block h at
// h dh^2), zeros elsewhere: one dense product then applies each head's block to that head's columns alone.
cudaError_t block_diagonal(const float* blocks, int H, int dh, float* W, cudaStream_t s);
// Y (N, n) += b broadcast over rows.
cudaError_t add_bias(float* Y, const float* b, int N, int n, cudaStream_t s);
// A = gelu(Z) (tanh form, core/model/gelu.hpp); dZ = dA * gelu'(Z) in place of dA.
cudaError_t gelu_forward(const float* Z, long long n, float* A, cudaStream_t s);
cudaError_t gelu_backward(float* dA_to_dZ, const float* Z, long long n, cudaStream_t s);
// (B, T, H, c) <-> (B, H, T, c): the row layout cuBLAS reads vs the recurrent kernels' layout (the
// products that gpu/gemm_3xtf32 takes read and write the latter in place).
cudaError_t bthc_to_bhtc(const float* x, int B, int T, int H, int c, float* y, cudaStream_t s);
cudaError_t bhtc_to_bthc(const float* x, int B, int T, int H, int c, float* y, cudaStream_t s);
// Per row n with targets[n] >= 0: ce[n] = logsumexp(logits[n]) - logits[n, target], correct[n] = argmax == target
// (first maximum, as Eigen's maxCoeff), dlogits[n] = (softmax - onehot) * scale; rows without a target: all 0.
cudaError_t softmax_cross_entropy(const float* logits, const int* targets, int N, int V, float scale, float* dlogits, float* ce,
                                  int* correct, cudaStream_t s);
// out[blk] = sum of squares (in double) of x over chunk blk; the host adds the partials in order.
inline constexpr int kSumSqBlocks = 256;
cudaError_t sum_squares_partials(const float* x, long long n, double* out, cudaStream_t s);
// AdamW on the n parameters of a flat array of `count` tensors (core/train/adamw.hpp's float arithmetic):
// G = grad * gscale (the clip); omb = float(1 - b) rounded from double as the CPU's T(1 - c.beta1);
// M = b1 M + omb1 G; V = b2 V + (1-b2) G^2; if decay: P -= lr wd P; P -= lr (M/bc1) / (sqrt(V/bc2) + eps).
// tensors (device, count entries, ascending): tensor k's start << 1 | (1 if it is decayed). One launch.
struct AdamwFactors {
  float gscale, b1, omb1, b2, omb2, bc1, bc2, lr, lr_wd, eps;
};
cudaError_t adamw(float* P, const float* grad, float* M, float* V, long long n, const long long* tensors, int count, const AdamwFactors& f,
                  cudaStream_t s);

}  // namespace vla::gpu::train
