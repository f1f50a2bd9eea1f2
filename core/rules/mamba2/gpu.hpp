#pragma once
// Mamba-2 has no CUDA kernel: it runs on the CPU only.
#include "core/rules/gpu_kernel.hpp"
#include "core/rules/mamba2/forward.hpp"

namespace vla {

template <class P> GpuKernel gpu_kernel(const Mamba2Rule<P>&) { return {}; }

}  // namespace vla
