#pragma once
// Gated DeltaNet has no CUDA kernel: it runs on the CPU only.
#include "core/rules/gated_deltanet/forward.hpp"
#include "core/rules/gpu_kernel.hpp"

namespace vla {

template <class P> GpuKernel gpu_kernel(const GatedDeltaNetRule<P>&) { return {}; }

}  // namespace vla
