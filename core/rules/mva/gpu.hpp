#pragma once
// MVA has no CUDA kernel: it runs on the CPU only.
#include "core/rules/gpu_kernel.hpp"
#include "core/rules/mva/forward.hpp"

namespace vla {

template <class P> GpuKernel gpu_kernel(const MvaRule<P>&) { return {}; }

}  // namespace vla
