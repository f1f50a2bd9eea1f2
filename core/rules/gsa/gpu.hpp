#pragma once
// GSA has no CUDA kernel: it runs on the CPU only.
#include "core/rules/gpu_kernel.hpp"
#include "core/rules/gsa/forward.hpp"

namespace vla {

template <class P> GpuKernel gpu_kernel(const GsaRule<P>&) { return {}; }

}  // namespace vla
