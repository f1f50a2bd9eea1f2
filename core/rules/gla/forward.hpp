#pragma once
// Gated Linear Attention (Yang et al. 2024; seed 004 sec. 5.4, "Definition (GLA State Update)"):
//   S_t = (alpha_t beta_t^T) . S_{t-1} + k_t^T v_t,   o_t = q_t S_t
// in the seed's row-vector form (S (d_k, d_v)); stored (d_v, d_k) as every rule here:
//   S_t = S_{t-1} diag(alpha_t) + v_t k_t^T,   o_t = S_t q_t,   alpha_t = sigmoid(g_t) in (0, 1)^{d_k}
// one decay per key channel, from d_h gate logits per head and token (the layer's gate projection).
// beta_t = 1, as Yang et al. use it in practice, so that the gate matrix
// alpha_t 1^T is the rank-1 form the chunkwise algorithm needs (chunked.hpp). As RetNet and Mamba-2
// (scalar_decay.hpp), q and k enter raw: no feature map, no key sum, no denominator. The memory, its step
// and its adjoint are the vector-gate family's (core/rules/vector_decay.hpp), shared with MetaLA. The paper's
// low-rank gate projection with a temperature (alpha = sigmoid(.)^(1/tau), tau = 16) and its output gate are
// parameterisation outside the recurrence.
#include "core/rules/mixer_config.hpp"
#include "core/rules/vector_decay.hpp"

#include <array>
#include <stdexcept>

namespace vla {

struct GlaOptions {};

template <class P> class GlaRule : public RuleOptions<GlaOptions> {
 public:
  using storage_t = typename P::storage_t;
  using compute_t = typename P::compute_t;
  static constexpr std::array<std::string_view, 1> names{"gla"};  // the mixer name
  static constexpr Needs needs{.penalty = false, .gate = true, .gates = Needs::kPerChannel};  // alpha_t: d_h logits
  static constexpr bool recurrent = true;

  using State = VectorDecayMemory<P>;

  using RuleOptions::RuleOptions;
  static GlaRule from_config(const MixerConfig& cfg) {
    if (cfg.renormalise_S) throw std::invalid_argument("--renormalise: gla has no S renormalisation (its decays alpha_t < 1 bound S)");
    return GlaRule();
  }

  State init(int batch, int d) const { return State(batch, d); }

  void step(State& st, const HeadInputs<storage_t>& in, Mat<storage_t>& out, StepRecord<compute_t>* rec) const {
    using C = compute_t;
    const auto [B, d] = begin_step(in, out, rec);
    if (in.gate.rows() != d) throw std::invalid_argument("gate: gla reads d_head gate logits per head and token");
    for (int b = 0; b < B; ++b)
      out.col(b) = st.step(b, column<C>(in.q, b), column<C>(in.k, b), column<C>(in.v, b), channel_decays(column<C>(in.gate, b)), rec);
  }
};

}  // namespace vla
