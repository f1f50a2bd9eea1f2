#pragma once
// MetaLA has no CUDA kernel: it runs on the CPU only.
#include "core/rules/gpu_kernel.hpp"
#include "core/rules/metala/forward.hpp"

namespace vla {

template <class P> GpuKernel gpu_kernel(const MetaLaRule<P>&) { return {}; }

}  // namespace vla
