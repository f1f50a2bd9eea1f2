#pragma once
// Gated Slot Attention (Zhang et al. 2024) as seed 002 writes it (sec. 2.3, recursive form; parallel form
// eq. 3, O = GLA(Softmax(GLA^T(Q, K, 1 - G, G)), 1 - G, V, G)), in the seed's row form:
//   K_t = diag(g_t) K_{t-1} + (1 - g_t)^T k_t,   V_t = diag(g_t) V_{t-1} + (1 - g_t)^T v_t,
//   o_t = Softmax(q_t K_t^T) V_t,   g_t = sigmoid(x_t W_g) in (0, 1)^m
// Two passes over m slots: the query attends to the slot keys with a softmax, and the attention reads the
// slot values. The state is two memories where the toolkit's rules hold one; slot_memory.hpp says how it
// fits (one (d, 2 d) matrix [V | K] per sequence, m = d_h slots, one decay per slot from the layer's gate
// projection, Needs::kPerChannel) and holds the step and its adjoint, shared with MVA (mva/), whose
// GSA branch this is (eq. 10, with Softmax where MVA puts a perceptron). q and k enter raw, and the
// softmax has no 1/sqrt(d) scale: the seed writes none. GSA's output normalisation and gate and its
// feature map on the slot scores (the GSA paper's Swish variants) lie outside the recurrence.
#include "core/rules/gsa/slot_memory.hpp"
#include "core/rules/mixer_config.hpp"

#include <array>
#include <stdexcept>

namespace vla {

struct GsaOptions {};

template <class P> class GsaRule : public RuleOptions<GsaOptions> {
 public:
  using storage_t = typename P::storage_t;
  using compute_t = typename P::compute_t;
  static constexpr std::array<std::string_view, 1> names{"gsa"};  // the mixer name
  static constexpr Needs needs{.penalty = false, .gate = true, .gates = Needs::kPerChannel};  // g_t: one logit per slot
  static constexpr bool recurrent = true;
  static constexpr SlotOptions kSlots{};  // one key memory, no linear branch

  using State = SlotMemory<P>;

  using RuleOptions::RuleOptions;
  static GsaRule from_config(const MixerConfig& cfg) {
    if (cfg.renormalise_S)
      throw std::invalid_argument("--renormalise: gsa has no S renormalisation (its slots are convex combinations of its inputs)");
    return GsaRule();
  }
  const SlotOptions& slots() const { return kSlots; }

  State init(int batch, int d) const { return State(batch, d, kSlots.levels); }

  void step(State& st, const HeadInputs<storage_t>& in, Mat<storage_t>& out, StepRecord<compute_t>* rec) const {
    using C = compute_t;
    const auto [B, d] = begin_step(in, out, rec);
    if (in.gate.rows() != d) throw std::invalid_argument("gate: gsa reads d_head gate logits per head and token");
    for (int b = 0; b < B; ++b)
      out.col(b) = st.step(b, column<C>(in.q, b), column<C>(in.k, b), column<C>(in.v, b), column<C>(in.gate, b), kSlots, rec);
  }
};

}  // namespace vla
