#pragma once
// MVA: the multi-level vocabulary decomposition of seed 002 (sec. 3.2-3.3, eq. 4-8) as a recurrence, c
// levels. Seed 002 eq. 6, in its row form, for levels i = 0 .. c-1 (k^(0) = k_t, v^(i) = v_t):
//   K_t^(i) = diag(f_g^(i)) K_{t-1}^(i) + (1 - f_alpha^(i)) k_t^(i),   V_t^(i) likewise with v_t
//   k_t^(i+1) = k_t^(i) - phi_k(k_t^(i) W_kc^(i)) K_t^(i)
//   P^(i) = phi_q(q_t W_qc^(i)) + sigma(q_t K_t^(i)T) W_S^(i),   o_t = sum_i diag(w^(i)) P^(i) V_t^(i)
// Each level is a GSA slot memory (gsa/) that stores what the levels before it did not capture of the
// key, read by the query through two branches (MetaLA's linear one and GSA's attention). The toolkit's
// layer has no per-level parameters (C^(i), W_qc^(i), W_S^(i), W_kc^(i) are learned (d, d) matrices in
// the paper), so the recurrence takes the parameter-free choices below (docs/recurrences.md, "MVA"):
//   gates    f_g^(i) = f_alpha^(i) = sigmoid(g_t), the layer's gate projection (d_h logits), every level
//            (the paper's sigmoid(C^(i) k_t^(i)) is linear in x_t at level 0: W_g = C^(0) W_k); the value
//            memories, all written with v_t under the same gates, are then one
//   residual k^(i+1) = k^(i) - K_t^(i) softmax(K_t^(i)T k^(i)): eq. 4's decomposition with its one-hot S
//            relaxed to the softmax sec. 3.2 and eq. 7 put in its place (eq. 7's W_kc^(i) = K_t^(i)T:
//            the key is compared with the slots it is decomposed against)
//   branches P_MetaLA^(i) = q_t (W_qc = I, phi_q = identity), P_GSA^(i) = softmax(K_t^(i)T q_t) (W_S = I,
//            with the softmax the perceptron approximates, eq. 39, so that one level is GSA exactly)
//   weights  w^(i) = 1 / c (eq. 6's w^(i) = P^(i) / sum_i P^(i) divides by a sum of signed vectors;
//            equal weights that sum to 1 are its well-defined part), the linear branch counted once
// so that  o_t = V_t q_t + V_t (1/c) sum_i softmax(K_t^(i)T q_t),  and c = 1 is MetaLA + GSA (metala/,
// gsa/) on the shared memories, exactly (the paper's "MVA w/o VD", Table 8). The step and its adjoint are
// the slot memories' (gsa/slot_memory.hpp) with c key memories and the linear branch; c is the knob
// mva_levels (MixerConfig, --mva-levels; default 2, the paper's Table 9).
#include "core/rules/gsa/slot_memory.hpp"
#include "core/rules/mixer_config.hpp"

#include <array>
#include <stdexcept>

namespace vla {

struct MvaOptions {
  int levels = MixerConfig{}.mva_levels;  // c
  bool hard_select = false;  // eq. 4's one-hot S in the residual (the analyses' Theorem 3.3 check; no knob)
  void validate() const { SlotOptions{levels}.validate(); }
};

template <class P> class MvaRule : public RuleOptions<MvaOptions> {
 public:
  using storage_t = typename P::storage_t;
  using compute_t = typename P::compute_t;
  static constexpr std::array<std::string_view, 1> names{"mva"};  // the mixer name
  static constexpr Needs needs{.penalty = false, .gate = true, .gates = Needs::kPerChannel};  // g_t: one logit per slot
  static constexpr bool recurrent = true;

  using State = SlotMemory<P>;

  MvaRule() : MvaRule(Options{}) {}
  explicit MvaRule(Options opt) : RuleOptions(opt), slots_{opt.levels, true, opt.hard_select} {}
  static MvaRule from_config(const MixerConfig& cfg) {
    if (cfg.renormalise_S)
      throw std::invalid_argument("--renormalise: mva has no S renormalisation (its slots are convex combinations of its inputs)");
    return MvaRule(Options{cfg.mva_levels});
  }
  const SlotOptions& slots() const { return slots_; }

  State init(int batch, int d) const { return State(batch, d, opt_.levels); }

  void step(State& st, const HeadInputs<storage_t>& in, Mat<storage_t>& out, StepRecord<compute_t>* rec) const {
    using C = compute_t;
    const auto [B, d] = begin_step(in, out, rec);
    if (in.gate.rows() != d) throw std::invalid_argument("gate: mva reads d_head gate logits per head and token");
    for (int b = 0; b < B; ++b)
      out.col(b) = st.step(b, column<C>(in.q, b), column<C>(in.k, b), column<C>(in.v, b), column<C>(in.gate, b), slots_, rec);
  }

 private:
  SlotOptions slots_;
};

}  // namespace vla
