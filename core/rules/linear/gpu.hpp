#pragma once
// Linear attention's CUDA kernel (RecurrentKind::Linear) writes v phi(k)^T; the normalised-key form
// of Remark 1 has none.
#include "core/rules/gpu_kernel.hpp"
#include "core/rules/linear/forward.hpp"

namespace vla {

template <class P> GpuKernel gpu_kernel(const LinearAttentionRule<P>& rule) {
  const LinearAttentionOptions& o = rule.options();
  if (o.normalise_key) return {};
  GpuKernel k;
  k.path = GpuPath::Recurrent;
  k.kind = gpu::RecurrentKind::Linear;
  k.params.eps = float(o.eps);
  k.renormalise = o.memory.renormalise;
  return k;
}

}  // namespace vla
