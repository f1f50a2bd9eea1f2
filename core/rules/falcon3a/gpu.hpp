#pragma once
// FALCON-3A has no CUDA kernel: it runs on the CPU only.
#include "core/rules/falcon3a/forward.hpp"
#include "core/rules/gpu_kernel.hpp"

namespace vla {

template <class P> GpuKernel gpu_kernel(const Falcon3aRule<P>&) { return {}; }

}  // namespace vla
