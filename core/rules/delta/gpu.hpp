#pragma once
// The delta rule has no CUDA kernel: the CPU paths serve it.
#include "core/rules/delta/forward.hpp"
#include "core/rules/gpu_kernel.hpp"

namespace vla {

template <class P> GpuKernel gpu_kernel(const DeltaRule<P>&) { return {}; }

}  // namespace vla
