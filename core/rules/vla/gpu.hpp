#pragma once
// VLA's CUDA kernels. gpu/recurrent_forward.cu and gpu/recurrent_backward.cu implement Algorithm 1 with
// unit post-update gain (eq. 20), A tracked by Sherman-Morrison, u from W_u k_raw scaled by 1/sqrt(d_h),
// and k_hat normalised or not (line 9; "vla" and "vla-no-knorm").
// "vla-fixed-a" runs on DeltaNet's kernel, ungated: with A_t = A_0 = I / lambda0 never updated (nor
// refreshed: the refresh is part of the update, core/inverse_penalty_tracker.hpp), line 20 gives
// alpha_hat = unit(k_hat / lambda0) = k_hat (k_hat is a unit vector; phi > 0 so it is never zero), and
// lines 21-22 become S += (v - S k_hat) k_hat^T, eq. (4) with beta = 1. W_u is then unused (its gradient
// is zero on both devices). The other variants (vla-v2, vla-rls, the key penalty source, a penalty
// scale) have no kernel.
#include "core/rules/gpu_kernel.hpp"
#include "core/rules/vla/forward.hpp"

#include <cmath>

namespace vla {

template <class P> GpuKernel gpu_kernel(const VlaRule<P>& rule) {
  const VlaOptions& o = rule.options();
  GpuKernel k;
  k.rank = o.penalty.rank;
  k.clamp = o.penalty.policy == DeltaPolicy::Clamp;
  k.renormalise = o.memory.renormalise;
  if (o.gain != VlaGain::UnitPost) return {};
  if (o.fixed_A) {
    if (!o.normalise_key) return {};  // alpha_hat = unit(phi(k)) is not the write key phi(k): not eq. (4)
    k.path = GpuPath::Recurrent;
    k.kind = gpu::RecurrentKind::DeltaNet;
    k.params.eps = float(o.penalty.eps);
    k.constant_A = 1.0 / o.penalty.lambda0;
    return k;
  }
  if (o.penalty_source != PenaltySource::Projection || !std::isnan(o.penalty_scale)) return {};
  k.path = GpuPath::Recurrent;
  k.kind = gpu::RecurrentKind::Vla;
  k.params.eps = float(o.penalty.eps);
  k.params.lambda0 = float(o.penalty.lambda0);
  k.params.refresh_period = o.penalty.refresh_period;
  k.params.refresh_eta = float(o.penalty.refresh_eta);
  k.params.normalise_key = o.normalise_key;
  return k;
}

}  // namespace vla
