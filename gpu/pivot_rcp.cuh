#pragma once
// The reciprocal of a factorisation's pivot in the chunked VLA forward (gpu/chunked_vla_forward.cu: the
// alphas' L D L^T, the penalty solves). CUDA source: included by .cu files only.
//
// Each pivot's reciprocal sits on a chain of dependent steps (the L D L^T's C pivots within a chunk, the
// penalty solve's 32), where the IEEE-rounded 1 / x (MUFU.RCP, a Newton refinement and a branch for special
// cases) adds to every step (docs/chunkwise-vla-gpu.md, "GPU forward"). The hardware approximation alone is within
// 1 ulp of 1 / x (PTX ISA, rcp.approx.f32); subnormal inputs and results flush to zero (a pivot that small
// has already lost the factorisation). NaN and infinities pass through as IEEE division passes them, so an
// overflow still shows in the outputs.
#include <cuda_runtime.h>

namespace vla::gpu {

__device__ __forceinline__ float pivot_rcp(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

}  // namespace vla::gpu
