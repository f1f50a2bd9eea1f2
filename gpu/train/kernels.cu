// Kernels of gpu/train/kernels.hpp: one thread per element, one block per row, or (column sums) a tile
// of columns per block with the rows split over its threads. The step's time should be in the cuBLAS
// projections and the recurrences, not here (docs/gpu.md, "Training throughput").
#include "gpu/train/kernels.hpp"

#include <algorithm>
#include <cfloat>

namespace vla::gpu::train {
namespace {

constexpr int kThreads = 256;
inline int blocks_for(long long n) { return int((n + kThreads - 1) / kThreads); }

__global__ void embed_fwd_k(const int* tokens, const float* tok, const float* pos, int N, int T, int d, float* X) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= (long long)N * d) return;
  const int n = int(i / d), j = int(i % d);
  X[i] = tok[(long long)tokens[n] * d + j] + pos[(long long)(n % T) * d + j];
}
__global__ void embed_bwd_tok_k(const int* positions, const int* starts, const float* dX, int d, int V, float* dtok) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= (long long)V * d) return;
  const int v = int(i / d), j = int(i % d);
  float acc = 0.f;
  for (int k = starts[v]; k < starts[v + 1]; ++k) acc += dX[(long long)positions[k] * d + j];
  dtok[i] += acc;
}

// Block-wide sum (blockDim.x a multiple of 32, at most 1024).
__device__ float block_sum(float v, float* sh) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int w = threadIdx.x / 32, l = threadIdx.x % 32;
  __syncthreads();
  if (l == 0) sh[w] = v;
  __syncthreads();
  float r = 0.f;
  for (int k = 0; k < int(blockDim.x / 32); ++k) r += sh[k];
  return r;
}

__global__ void ln_fwd_k(const float* X, const float* g, const float* b, int d, float* Y, float* xhat, float* rstd) {
  __shared__ float sh[32];
  const long long row = blockIdx.x;
  const float* x = X + row * d;
  float s = 0.f;
  for (int j = threadIdx.x; j < d; j += blockDim.x) s += x[j];
  const float mean = block_sum(s, sh) / float(d);
  float s2 = 0.f;
  for (int j = threadIdx.x; j < d; j += blockDim.x) { const float c = x[j] - mean; s2 += c * c; }
  const float var = block_sum(s2, sh) / float(d);
  const float r = 1.f / sqrtf(var + 1e-5f);
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    const float xh = (x[j] - mean) * r;
    xhat[row * d + j] = xh;
    Y[row * d + j] = xh * g[j] + b[j];
  }
  if (threadIdx.x == 0) rstd[row] = r;
}
__global__ void ln_bwd_k(const float* dY, const float* g, const float* xhat, const float* rstd, int d, float* dX, bool acc) {
  __shared__ float sh[32];
  const long long row = blockIdx.x;
  float s1 = 0.f, s2 = 0.f;
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    const float dxh = dY[row * d + j] * g[j];
    s1 += dxh;
    s2 += dxh * xhat[row * d + j];
  }
  const float m1 = block_sum(s1, sh) / float(d);
  const float m2 = block_sum(s2, sh) / float(d);
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    const float dxh = dY[row * d + j] * g[j];
    const float v = (dxh - m1 - xhat[row * d + j] * m2) * rstd[row];
    dX[row * d + j] = acc ? dX[row * d + j] + v : v;
  }
}
// Column sums of a row-major (N, m) matrix dY, and with xhat also of dY * xhat (LayerNorm's gain
// gradient). Block (tile, split) owns kColTile columns of the rows [split R, (split + 1) R); its thread
// (x, y) adds rows y, y + kRowLanes, ... of column x in row order, then the kRowLanes partial sums meet in
// a fixed tree over y. With one split the block adds its sums into db (and dg); with several it writes
// them to scratch (db's splits, then dg's) and column_sums_splits_k adds the splits in order. One thread
// per column over all N rows was half of a training step's GPU time, and a block per column tile without
// splits left most SMs idle at the batch sizes of a sweep (docs/gpu.md, "Training throughput").
constexpr int kColTile = 32, kRowLanes = 32;
constexpr int kColSumBlocks = 256;   // blocks a launch aims at: a constant, so the order (and the bits) are the same on every GPU
constexpr int kMinSplitRows = 64, kMaxSplits = 64;
int column_tiles(int m) { return (m + kColTile - 1) / kColTile; }
int column_splits(int N, int m) {
  const int want = (kColSumBlocks + column_tiles(m) - 1) / column_tiles(m);
  return std::max(1, std::min({want, kMaxSplits, N / kMinSplitRows}));
}
template <bool kGain>
__global__ void column_sums_k(const float* dY, const float* xhat, int N, int m, int rows_per_split, float* dg, float* db, float* scratch) {
  __shared__ float sum_y[kRowLanes][kColTile + 1], sum_yx[kGain ? kRowLanes : 1][kColTile + 1];
  const int x = threadIdx.x, y = threadIdx.y, j = blockIdx.x * kColTile + x, split = blockIdx.y;
  const long long stop = (long long)(split + 1) * rows_per_split, end = stop < N ? stop : N;
  float c = 0.f, a = 0.f;
  if (j < m)
    for (long long n = (long long)split * rows_per_split + y; n < end; n += kRowLanes) {
      const float v = dY[n * m + j];
      c += v;
      if (kGain) a += v * xhat[n * m + j];
    }
  sum_y[y][x] = c;
  if (kGain) sum_yx[y][x] = a;
  __syncthreads();
  for (int o = kRowLanes / 2; o > 0; o >>= 1) {
    if (y < o) {
      sum_y[y][x] += sum_y[y + o][x];
      if (kGain) sum_yx[y][x] += sum_yx[y + o][x];
    }
    __syncthreads();
  }
  if (y != 0 || j >= m) return;
  if (gridDim.y == 1) {
    db[j] += sum_y[0][x];
    if (kGain) dg[j] += sum_yx[0][x];
  } else {
    scratch[(long long)split * m + j] = sum_y[0][x];
    if (kGain) scratch[((long long)gridDim.y + split) * m + j] = sum_yx[0][x];
  }
}
template <bool kGain>
__global__ void column_sums_splits_k(const float* scratch, int splits, int m, float* dg, float* db) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= m) return;
  float c = 0.f, a = 0.f;
  for (int s = 0; s < splits; ++s) {
    c += scratch[(long long)s * m + j];
    if (kGain) a += scratch[((long long)splits + s) * m + j];
  }
  db[j] += c;
  if (kGain) dg[j] += a;
}
template <bool kGain>
cudaError_t launch_column_sums(const float* dY, const float* xhat, int N, int m, float* dg, float* db, float* scratch, cudaStream_t s) {
  if (N <= 0 || m <= 0) return cudaSuccess;
  const int splits = column_splits(N, m), rows = (N + splits - 1) / splits;
  column_sums_k<kGain><<<dim3(column_tiles(m), splits), dim3(kColTile, kRowLanes), 0, s>>>(dY, xhat, N, m, rows, dg, db, scratch);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess || splits == 1) return e;
  column_sums_splits_k<kGain><<<blocks_for(m), kThreads, 0, s>>>(scratch, splits, m, dg, db);
  return cudaGetLastError();
}
__global__ void add_diagonal_blocks_k(const float* full, int H, int dh, float* out) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= (long long)H * dh * dh) return;
  const int h = int(i / (dh * dh)), r = int(i / dh % dh), c = int(i % dh);
  const long long hd = (long long)H * dh;
  out[i] += full[(h * dh + r) * hd + h * dh + c];
}
__global__ void block_diagonal_k(const float* blocks, int H, int dh, float* W) {
  const long long hd = (long long)H * dh, i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= hd * hd) return;
  const int row = int(i / hd), col = int(i % hd), h = row / dh;
  W[i] = col / dh == h ? blocks[(long long)row * dh + col - h * dh] : 0.f;
}
__global__ void add_bias_k(float* Y, const float* b, long long total, int m) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < total) Y[i] += b[i % m];
}
__device__ float gelu_f(float x) {
  const float c = 0.7978845608028654f;
  return 0.5f * x * (1.f + tanhf(c * (x + 0.044715f * x * x * x)));
}
__device__ float gelu_grad_f(float x) {
  const float c = 0.7978845608028654f;
  const float th = tanhf(c * (x + 0.044715f * x * x * x));
  return 0.5f * (1.f + th) + 0.5f * x * (1.f - th * th) * c * (1.f + 3.f * 0.044715f * x * x);
}
__global__ void gelu_fwd_k(const float* Z, long long n, float* A) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) A[i] = gelu_f(Z[i]);
}
__global__ void gelu_bwd_k(float* dA, const float* Z, long long n) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) dA[i] *= gelu_grad_f(Z[i]);
}
// to_bh: (B,T,H,c) -> (B,H,T,c); else the inverse.
__global__ void permute_k(const float* x, int B, int T, int H, int c, float* y, bool to_bh) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= (long long)B * T * H * c) return;
  const int e = int(i % c);
  long long r = i / c;
  const int h = int(r % H); r /= H;
  const int t = int(r % T);
  const int b = int(r / T);
  const long long j = (((long long)b * H + h) * T + t) * c + e;  // (B,H,T,c) index of the (b,t,h,e) element i
  if (to_bh) y[j] = x[i]; else y[i] = x[j];
}
__global__ void ce_k(const float* logits, const int* targets, int V, float scale, float* dl, float* ce, int* correct) {
  __shared__ float sh[32];
  __shared__ float smax[1024];
  __shared__ int sarg[1024];
  const long long row = blockIdx.x;
  const float* z = logits + row * V;
  const int tg = targets[row];
  if (tg < 0) {
    for (int j = threadIdx.x; j < V; j += blockDim.x) dl[row * V + j] = 0.f;
    if (threadIdx.x == 0) { ce[row] = 0.f; correct[row] = 0; }
    return;
  }
  float m = -FLT_MAX; int arg = V;
  for (int j = threadIdx.x; j < V; j += blockDim.x)
    if (z[j] > m) { m = z[j]; arg = j; }
  smax[threadIdx.x] = m; sarg[threadIdx.x] = arg;
  __syncthreads();
  for (int o = blockDim.x / 2; o > 0; o >>= 1) {  // max, ties to the smallest index (Eigen's maxCoeff)
    if (threadIdx.x < o) {
      const float m2 = smax[threadIdx.x + o]; const int a2 = sarg[threadIdx.x + o];
      if (m2 > smax[threadIdx.x] || (m2 == smax[threadIdx.x] && a2 < sarg[threadIdx.x])) { smax[threadIdx.x] = m2; sarg[threadIdx.x] = a2; }
    }
    __syncthreads();
  }
  const float mx = smax[0];
  const int am = sarg[0];
  float s = 0.f;
  for (int j = threadIdx.x; j < V; j += blockDim.x) s += expf(z[j] - mx);
  const float sum = block_sum(s, sh);
  for (int j = threadIdx.x; j < V; j += blockDim.x) dl[row * V + j] = (expf(z[j] - mx) / sum - (j == tg ? 1.f : 0.f)) * scale;
  if (threadIdx.x == 0) { ce[row] = logf(sum) + mx - z[tg]; correct[row] = am == tg; }
}
__global__ void sumsq_k(const float* x, long long n, double* out) {
  __shared__ double sh[kThreads];
  double a = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    a += double(x[i]) * double(x[i]);
  sh[threadIdx.x] = a;
  __syncthreads();
  for (int o = blockDim.x / 2; o > 0; o >>= 1) {
    if (threadIdx.x < o) sh[threadIdx.x] += sh[threadIdx.x + o];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = sh[0];
}
// One launch for every tensor of the flat arrays: element i belongs to the last tensor whose start is
// <= i (binary search of `tensors`, each entry start << 1 | decay, ascending). The arithmetic per element
// is the per-tensor update's, so the result does not depend on how the arrays are split into launches.
__global__ void adamw_k(float* P, const float* grad, float* M, float* V, long long n, const long long* tensors, int count, AdamwFactors f) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if ((tensors[mid] >> 1) <= i) lo = mid; else hi = mid - 1;
  }
  const bool decay = tensors[lo] & 1;
  const float G = grad[i] * f.gscale;
  const float m = f.b1 * M[i] + f.omb1 * G;
  const float v = f.b2 * V[i] + f.omb2 * G * G;
  M[i] = m; V[i] = v;
  float p = P[i];
  if (decay) p -= f.lr_wd * p;
  p -= f.lr * (m / f.bc1) / (sqrtf(v / f.bc2) + f.eps);
  P[i] = p;
}

}  // namespace

cudaError_t embed_forward(const int* tokens, const float* tok, const float* pos, int N, int T, int d, float* X, cudaStream_t s) {
  embed_fwd_k<<<blocks_for((long long)N * d), kThreads, 0, s>>>(tokens, tok, pos, N, T, d, X);
  return cudaGetLastError();
}
cudaError_t embed_backward_tokens(const int* positions, const int* starts, const float* dX, int d, int V, float* dtok, cudaStream_t s) {
  embed_bwd_tok_k<<<blocks_for((long long)V * d), kThreads, 0, s>>>(positions, starts, dX, d, V, dtok);
  return cudaGetLastError();
}
cudaError_t layernorm_forward(const float* X, const float* g, const float* b, int N, int d, float* Y, float* xhat, float* rstd, cudaStream_t s) {
  ln_fwd_k<<<N, 128, 0, s>>>(X, g, b, d, Y, xhat, rstd);
  return cudaGetLastError();
}
cudaError_t layernorm_backward(const float* dY, const float* g, const float* xhat, const float* rstd, int N, int d, float* dX,
                               bool accumulate, float* dg, float* db, float* scratch, cudaStream_t s) {
  cudaError_t e = launch_column_sums<true>(dY, xhat, N, d, dg, db, scratch, s);
  if (e != cudaSuccess) return e;
  ln_bwd_k<<<N, 128, 0, s>>>(dY, g, xhat, rstd, d, dX, accumulate);
  return cudaGetLastError();
}
cudaError_t column_sums(const float* dY, int N, int n_cols, float* db, float* scratch, cudaStream_t s) {
  return launch_column_sums<false>(dY, nullptr, N, n_cols, nullptr, db, scratch, s);
}
std::size_t column_sums_scratch_floats(int N, int n_cols) {
  const int splits = column_splits(N, n_cols);
  return splits == 1 ? 0 : 2 * std::size_t(splits) * std::size_t(n_cols);
}
cudaError_t add_diagonal_blocks(const float* full, int H, int dh, float* out, cudaStream_t s) {
  add_diagonal_blocks_k<<<blocks_for((long long)H * dh * dh), kThreads, 0, s>>>(full, H, dh, out);
  return cudaGetLastError();
}
cudaError_t block_diagonal(const float* blocks, int H, int dh, float* W, cudaStream_t s) {
  block_diagonal_k<<<blocks_for((long long)H * dh * H * dh), kThreads, 0, s>>>(blocks, H, dh, W);
  return cudaGetLastError();
}
cudaError_t add_bias(float* Y, const float* b, int N, int n, cudaStream_t s) {
  add_bias_k<<<blocks_for((long long)N * n), kThreads, 0, s>>>(Y, b, (long long)N * n, n);
  return cudaGetLastError();
}
cudaError_t gelu_forward(const float* Z, long long n, float* A, cudaStream_t s) {
  gelu_fwd_k<<<blocks_for(n), kThreads, 0, s>>>(Z, n, A);
  return cudaGetLastError();
}
cudaError_t gelu_backward(float* dA, const float* Z, long long n, cudaStream_t s) {
  gelu_bwd_k<<<blocks_for(n), kThreads, 0, s>>>(dA, Z, n);
  return cudaGetLastError();
}
cudaError_t bthc_to_bhtc(const float* x, int B, int T, int H, int c, float* y, cudaStream_t s) {
  permute_k<<<blocks_for((long long)B * T * H * c), kThreads, 0, s>>>(x, B, T, H, c, y, true);
  return cudaGetLastError();
}
cudaError_t bhtc_to_bthc(const float* x, int B, int T, int H, int c, float* y, cudaStream_t s) {
  permute_k<<<blocks_for((long long)B * T * H * c), kThreads, 0, s>>>(x, B, T, H, c, y, false);
  return cudaGetLastError();
}
cudaError_t softmax_cross_entropy(const float* logits, const int* targets, int N, int V, float scale, float* dlogits, float* ce,
                                  int* correct, cudaStream_t s) {
  ce_k<<<N, 128, 0, s>>>(logits, targets, V, scale, dlogits, ce, correct);
  return cudaGetLastError();
}
cudaError_t sum_squares_partials(const float* x, long long n, double* out, cudaStream_t s) {
  sumsq_k<<<kSumSqBlocks, kThreads, 0, s>>>(x, n, out);
  return cudaGetLastError();
}
cudaError_t adamw(float* P, const float* grad, float* M, float* V, long long n, const long long* tensors, int count, const AdamwFactors& f,
                  cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  adamw_k<<<blocks_for(n), kThreads, 0, s>>>(P, grad, M, V, n, tensors, count, f);
  return cudaGetLastError();
}

}  // namespace vla::gpu::train
