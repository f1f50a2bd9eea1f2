#pragma once
// The state every fast-weight rule carries (linear attention, DeltaNet, VLA) and the read they share.
// The rules differ only in how they WRITE S (eqs. 3, 4, 9); what they keep besides (the running key
// sum z) and how they READ (eq. 11, Alg. 1 lines 24-26) are the same, so they live here once:
//   z_t = z_{t-1} + phi(k_t),   o_t = S_t phi(q_t) / max(phi(q_t)^T z_t, eps).
// z sums the UNnormalised features phi(k_t) for every rule (Alg. 1 line 25), also where S is written
// with unit keys k_hat: that is the paper's read, not a simplification of ours.
#include "core/memory_matrix_manager.hpp"
#include "core/rules/memory_rule.hpp"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

namespace vla {

using MemoryOptions = typename MemoryMatrixManager<Precision<double>>::Options;

// The options of a rule whose only hyper-parameters are the read's floor and S's renormalisation
// (linear attention and DeltaNet derive theirs from it; VLA's eps is its penalty's).
struct FastWeightOptions {
  double eps = 1e-4;     // floor of the read's denominator, eq. (11)
  MemoryOptions memory;  // S renormalisation, off by default (001)
  void validate() const {
    if (!(eps > 0.0) || !std::isfinite(eps))
      throw std::invalid_argument(fmt::format("eps: must be a finite number > 0, got {}", eps));
    memory.validate();
  }
};

template <class P> struct NormalisedMemory {
  using storage_t = typename P::storage_t;
  using compute_t = typename P::compute_t;

  MemoryMatrixManager<P> memory;  // S: (B, d, d), (d_v, d_k) per sequence
  std::vector<Vec<storage_t>> z;  // (B, d) running sum of phi(k_s), s <= t

  NormalisedMemory(int batch, int d, const MemoryOptions& opt)
      : memory(batch, d, d, typename MemoryMatrixManager<P>::Options{opt.renormalise, opt.renorm_threshold}),
        z(batch, Vec<storage_t>::Zero(d)) {}

  // Alg. 1 lines 24-26 for sequence b, called after the rule has written S_t: adds k_feat = phi(k_t)
  // to z and returns o_t, computed in the compute type from the stored (storage-type) S_t and z_t.
  Vec<storage_t> accumulate_and_read(int b, const Vec<compute_t>& k_feat, const Vec<storage_t>& q, const compute_t& eps) {
    using C = compute_t;
    z[b] = cast_vector<storage_t>(Vec<C>(cast_vector<C>(z[b]) + k_feat));
    const Vec<C> q_feat = elu_plus_one(cast_vector<C>(q));
    return cast_vector<storage_t>(normalised_read(cast_matrix<C>(memory.S(b)), q_feat, cast_vector<C>(z[b]), eps));
  }
};

}  // namespace vla
