#pragma once
// FALCON-2 has no CUDA kernel: it runs on the CPU only.
#include "core/rules/falcon2/forward.hpp"
#include "core/rules/gpu_kernel.hpp"

namespace vla {

template <class P> GpuKernel gpu_kernel(const Falcon2Rule<P>&) { return {}; }

}  // namespace vla
