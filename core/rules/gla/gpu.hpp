#pragma once
// GLA has no CUDA kernel: it runs on the CPU only.
#include "core/rules/gla/forward.hpp"
#include "core/rules/gpu_kernel.hpp"

namespace vla {

template <class P> GpuKernel gpu_kernel(const GlaRule<P>&) { return {}; }

}  // namespace vla
