#pragma once
// FALCON-3 has no CUDA kernel: it runs on the CPU only.
#include "core/rules/falcon3/forward.hpp"
#include "core/rules/gpu_kernel.hpp"

namespace vla {

template <class P> GpuKernel gpu_kernel(const Falcon3Rule<P>&) { return {}; }

}  // namespace vla
