#pragma once
// Gated DeltaNet (Yang, Kautz and Hatamizadeh 2024; the gated member of seed 004 sec. 6.4's delta rule):
//   S_t = alpha_t S_{t-1} (I - beta_t k_hat_t k_hat_t^T) + beta_t v_t k_hat_t^T
//       = alpha_t S_{t-1} + beta_t (v_t - alpha_t S_{t-1} k_hat_t) k_hat_t^T,
//   alpha_t = sigmoid(g_{t,0}) in (0, 1) (Mamba-2's decay, mamba2/),  beta_t = sigmoid(g_{t,1}) in (0, 1) (DeltaNet's
//   gain, deltanet/)
// (stored (d_v, d_k), as every rule here): the delta rule's residual write on a state that also decays,
// so that a gate can clear old associations (the decay) and write precisely (the delta rule). Two gate
// logits per head and token from the layer's gate projection. Keys and read as DeltaNet's: k_hat_t =
// unit(phi(k_t)) and the eq. (11) normalised read, so that the delta rules here differ only in their
// write (delta_write.hpp: a = c = alpha_t, b = beta_t). The paper's alpha_t = exp(-softplus(.) A) and its
// output gate and short convolution are parameterisation outside the recurrence.
#include "core/rules/delta_write.hpp"
#include "core/rules/mixer_config.hpp"
#include "core/rules/normalised_memory.hpp"

#include <array>

namespace vla {

struct GatedDeltaNetOptions : FastWeightOptions {};

template <class P> class GatedDeltaNetRule : public RuleOptions<GatedDeltaNetOptions> {
 public:
  using storage_t = typename P::storage_t;
  using compute_t = typename P::compute_t;
  static constexpr std::array<std::string_view, 1> names{"gated-deltanet"};  // the mixer name
  static constexpr Needs needs{.penalty = false, .gate = true, .gates = 2};  // g_0 -> alpha_t, g_1 -> beta_t
  static constexpr bool recurrent = true;

  using State = NormalisedMemory<P>;

  using RuleOptions::RuleOptions;
  static GatedDeltaNetRule from_config(const MixerConfig& cfg) {
    return GatedDeltaNetRule(Options{{cfg.penalty.eps, MemoryOptions{cfg.renormalise_S, cfg.renorm_threshold}}});
  }

  State init(int batch, int d) const { return State(batch, d, opt_.memory); }

  void step(State& st, const HeadInputs<storage_t>& in, Mat<storage_t>& out, StepRecord<compute_t>* rec) const {
    using C = compute_t;
    const auto [B, d] = begin_step(in, out, rec);
    const C eps = scalar_cast<C>(opt_.eps);
    for (int b = 0; b < B; ++b) {
      const Vec<C> k_feat = elu_plus_one(column<C>(in.k, b));
      const Vec<C> k_hat = unit(k_feat);
      const C alpha = sigmoid(scalar_cast<C>(in.gate(0, b))), beta = sigmoid(scalar_cast<C>(in.gate(1, b)));
      // a = c = alpha, b = beta (delta_write.hpp): the residual reads the decayed state alpha S_{t-1}.
      const Vec<C> k_read = alpha * k_hat, w = beta * k_hat;
      const auto wr = st.memory.residual_write(b, k_read, w, column<C>(in.v, b), alpha);
      out.col(b) = st.accumulate_and_read(b, k_feat, Vec<storage_t>(in.q.col(b)), eps);
      st.record_write(rec, b, wr, WriteRecord<C>{k_read, w, alpha});  // S -> S (alpha I - alpha beta k_hat k_hat^T)
    }
  }
};

}  // namespace vla
