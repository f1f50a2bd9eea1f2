#pragma once
// MetaLA (Chou et al. 2024) as seed 002 writes it (sec. 2.2.2, eq. 2 and its recursive form):
//   S_t = diag(g_t) S_{t-1} + (1 - g_t)^T v_t,   o_t = q_t S_t,   g_t = sigmoid(x_t W_g) in (0, 1)^{d_k}
// in the seed's row-vector form (S (d_k, d_v)); parallel form O = LA(Q . B, (1 - G) / B, V) (eq. 2). This is
// GLA (eq. 1) with the key tied to the gate, k_t = 1 - g_t: MetaLA drops the key projection. Stored
// (d_v, d_k) as every rule here:
//   S_t = S_{t-1} diag(alpha_t) + v_t (1 - alpha_t)^T,   o_t = S_t q_t,   alpha_t = sigmoid(g_t)
// with the d_h gate logits per head and token of the layer's gate projection (Needs::kPerChannel), so it
// is GLA's memory, step and adjoint (core/rules/vector_decay.hpp) with the written key 1 - alpha_t,
// computed as sigmoid(-g_t) (no cancellation where alpha_t rounds to 1). The layer's key k_t is not
// read (its gradient is 0). q enters raw (phi_q(x) = x, seed 002 eq. 6); MetaLA's other parts (its
// self-augmentation and short convolution) lie outside the recurrence.
#include "core/rules/mixer_config.hpp"
#include "core/rules/vector_decay.hpp"

#include <array>
#include <stdexcept>

namespace vla {

struct MetaLaOptions {};

template <class P> class MetaLaRule : public RuleOptions<MetaLaOptions> {
 public:
  using storage_t = typename P::storage_t;
  using compute_t = typename P::compute_t;
  static constexpr std::array<std::string_view, 1> names{"metala"};  // the mixer name
  static constexpr Needs needs{.penalty = false, .gate = true, .gates = Needs::kPerChannel};  // alpha_t: d_h logits
  static constexpr bool recurrent = true;

  using State = VectorDecayMemory<P>;

  using RuleOptions::RuleOptions;
  static MetaLaRule from_config(const MixerConfig& cfg) {
    if (cfg.renormalise_S)
      throw std::invalid_argument("--renormalise: metala has no S renormalisation (its decays alpha_t < 1 bound S)");
    return MetaLaRule();
  }

  State init(int batch, int d) const { return State(batch, d); }

  void step(State& st, const HeadInputs<storage_t>& in, Mat<storage_t>& out, StepRecord<compute_t>* rec) const {
    using C = compute_t;
    const auto [B, d] = begin_step(in, out, rec);
    if (in.gate.rows() != d) throw std::invalid_argument("gate: metala reads d_head gate logits per head and token");
    for (int b = 0; b < B; ++b) {
      const Vec<C> g = column<C>(in.gate, b);
      out.col(b) = st.step(b, column<C>(in.q, b), channel_complements(g), column<C>(in.v, b), channel_decays(g), rec);
    }
  }
};

}  // namespace vla
