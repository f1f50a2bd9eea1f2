#pragma once
// Linear attention with the ELU+1 feature map (Katharopoulos et al.; paper eq. 3):
//   S_t = S_{t-1} + v_t phi(k_t)^T,   z_t = z_{t-1} + phi(k_t),   o_t = S_t phi(q_t) / max(phi(q_t)^T z_t, eps)
// S is stored as (d_v, d_k) so that S k reads a value, the orientation of every rule here (the paper
// writes eq. 3 transposed). The eps floor is eq. (11)'s, shared by every rule of the family.
// normalise_key writes v_t k_hat_t^T instead (the "normalised linear attention" of Remark 1).
#include "core/rules/mixer_config.hpp"
#include "core/rules/normalised_memory.hpp"

#include <array>

namespace vla {

struct LinearAttentionOptions : FastWeightOptions {
  bool normalise_key = false;
};

template <class P> class LinearAttentionRule : public RuleOptions<LinearAttentionOptions> {
 public:
  using storage_t = typename P::storage_t;
  using compute_t = typename P::compute_t;
  static constexpr std::array<std::string_view, 1> names{"linear"};  // the mixer name
  static constexpr Needs needs{};
  static constexpr bool recurrent = true;

  using State = NormalisedMemory<P>;

  using RuleOptions::RuleOptions;
  static LinearAttentionRule from_config(const MixerConfig& cfg) {
    return LinearAttentionRule(Options{{cfg.penalty.eps, MemoryOptions{cfg.renormalise_S, cfg.renorm_threshold}}, false});
  }

  State init(int batch, int d) const { return State(batch, d, opt_.memory); }

  void step(State& st, const HeadInputs<storage_t>& in, Mat<storage_t>& out, StepRecord<compute_t>* rec) const {
    using C = compute_t;
    const auto [B, d] = begin_step(in, out, rec);
    const C eps = scalar_cast<C>(opt_.eps);
    for (int b = 0; b < B; ++b) {
      const Vec<C> k_feat = elu_plus_one(cast_vector<C>(Vec<storage_t>(in.k.col(b))));
      const Vec<C> w = opt_.normalise_key ? unit(k_feat) : k_feat;
      const auto wr = st.memory.additive_write(b, w, cast_vector<C>(Vec<storage_t>(in.v.col(b))));
      out.col(b) = st.accumulate_and_read(b, k_feat, Vec<storage_t>(in.q.col(b)), eps);
      // Additive: the "residual" norm is ||v_t||; no residual read: dS_t/dS_{t-1} = I.
      st.record_write(rec, b, wr, WriteRecord<C>{w, Vec<C>(), C(1)});
    }
  }
};

}  // namespace vla
