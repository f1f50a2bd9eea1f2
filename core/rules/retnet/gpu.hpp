#pragma once
// RetNet has no CUDA kernel: it runs on the CPU only.
#include "core/rules/gpu_kernel.hpp"
#include "core/rules/retnet/forward.hpp"

namespace vla {

template <class P> GpuKernel gpu_kernel(const RetNetRule<P>&) { return {}; }

}  // namespace vla
