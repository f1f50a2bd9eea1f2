#pragma once
// FALCON-2A has no CUDA kernel: it runs on the CPU only.
#include "core/rules/falcon2a/forward.hpp"
#include "core/rules/gpu_kernel.hpp"

namespace vla {

template <class P> GpuKernel gpu_kernel(const Falcon2aRule<P>&) { return {}; }

}  // namespace vla
