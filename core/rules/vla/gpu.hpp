#pragma once
// VLA's CUDA kernel (gpu/recurrent_forward.cu, gpu/recurrent_backward.cu) implements Algorithm 1, the
// "vla" preset: unit keys, the post-update unit gain, A tracked by Sherman-Morrison, u from W_u k_raw
// scaled by 1/sqrt(d_h). The other variants have no kernel.
#include "core/rules/gpu_kernel.hpp"
#include "core/rules/vla/forward.hpp"

#include <cmath>

namespace vla {

template <class P> GpuKernel gpu_kernel(const VlaRule<P>& rule) {
  const VlaOptions& o = rule.options();
  const VlaOptions alg1 = VlaOptions::preset("vla");
  const bool is_alg1 = o.normalise_key == alg1.normalise_key && o.gain == alg1.gain && o.fixed_A == alg1.fixed_A &&
                       o.penalty_source == alg1.penalty_source && std::isnan(o.penalty_scale);
  if (!is_alg1) return {};
  GpuKernel k;
  k.path = GpuPath::Recurrent;
  k.kind = gpu::RecurrentKind::Vla;
  k.params.eps = float(o.penalty.eps);
  k.params.lambda0 = float(o.penalty.lambda0);
  k.params.refresh_period = o.penalty.refresh_period;
  k.params.refresh_eta = float(o.penalty.refresh_eta);
  k.rank = o.penalty.rank;
  k.clamp = o.penalty.policy == DeltaPolicy::Clamp;
  k.renormalise = o.memory.renormalise;
  return k;
}

}  // namespace vla
