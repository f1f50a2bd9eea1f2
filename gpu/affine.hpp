#pragma once
// Y = X W^T + b on the device, row-major fp32: X (rows, in), W (out, in), b (out) or null, Y (rows, out).
// The dense projections of the single-head layer-forward contract; a plain tiled kernel (the contract
// is for checking, not speed; the benchmark times the recurrence alone).
#include <cuda_runtime.h>

namespace vla::gpu {

cudaError_t affine_rows(const float* X, int rows, int in, const float* W, const float* b, int out, float* Y,
                        cudaStream_t stream = nullptr);

}  // namespace vla::gpu
