#pragma once
// Softmax attention runs on the GPU's softmax path (gpu/softmax_attention.hpp: cuBLAS products and
// fused row kernels), not on a recurrent kernel; it has no parameters.
#include "core/rules/gpu_kernel.hpp"
#include "core/rules/softmax/forward.hpp"

namespace vla {

template <class P> GpuKernel gpu_kernel(const SoftmaxRule<P>&) {
  GpuKernel k;
  k.path = GpuPath::Softmax;
  return k;
}

}  // namespace vla
