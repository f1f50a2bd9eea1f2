#include "gpu/affine.hpp"

namespace vla::gpu {
namespace {

constexpr int kTile = 16;

// One 16x16 tile of Y per block; X and W tiles staged in shared memory; fp32 accumulation.
__global__ void affine_rows_kernel(const float* X, int rows, int in, const float* W, const float* b, int out, float* Y) {
  __shared__ float xs[kTile][kTile + 1];
  __shared__ float ws[kTile][kTile + 1];
  const int r = blockIdx.y * kTile + threadIdx.y;  // row of X and Y
  const int c = blockIdx.x * kTile + threadIdx.x;  // row of W, column of Y
  float acc = 0.f;
  for (int k0 = 0; k0 < in; k0 += kTile) {
    const int kx = k0 + threadIdx.x;
    xs[threadIdx.y][threadIdx.x] = (r < rows && kx < in) ? X[(long long)r * in + kx] : 0.f;
    const int wr = blockIdx.x * kTile + threadIdx.y;
    ws[threadIdx.y][threadIdx.x] = (wr < out && kx < in) ? W[(long long)wr * in + kx] : 0.f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kTile; ++k) acc = fmaf(xs[threadIdx.y][k], ws[threadIdx.x][k], acc);
    __syncthreads();
  }
  if (r < rows && c < out) Y[(long long)r * out + c] = acc + (b ? b[c] : 0.f);
}

}  // namespace

cudaError_t affine_rows(const float* X, int rows, int in, const float* W, const float* b, int out, float* Y,
                        cudaStream_t stream) {
  if (rows < 0 || in < 1 || out < 1) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  const dim3 block(kTile, kTile), grid((out + kTile - 1) / kTile, (rows + kTile - 1) / kTile);
  affine_rows_kernel<<<grid, block, 0, stream>>>(X, rows, in, W, b, out, Y);
  return cudaGetLastError();
}

}  // namespace vla::gpu
