#pragma once
// DeltaNet's CUDA kernel (RecurrentKind::DeltaNet), gated (it reads the gate logits) or not.
#include "core/rules/deltanet/forward.hpp"
#include "core/rules/gpu_kernel.hpp"

namespace vla {

template <class P> GpuKernel gpu_kernel(const DeltaNetRule<P>& rule) {
  const DeltaNetOptions& o = rule.options();
  GpuKernel k;
  k.path = GpuPath::Recurrent;
  k.kind = gpu::RecurrentKind::DeltaNet;
  k.params.eps = float(o.eps);
  k.gated = o.gated;
  k.renormalise = o.memory.renormalise;
  return k;
}

}  // namespace vla
