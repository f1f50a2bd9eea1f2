#pragma once
// The classic delta rule (Widrow-Hoff; seed 004 sec. 6.4, "Definition (Delta Rule Update)"), one step of
// gradient descent on the online squared error L_t(S) = 1/2 ||S k_t - v_t||^2 with step size beta_t:
//   S_t = S_{t-1} + beta_t (v_t - S_{t-1} k_hat_t) k_hat_t^T,   beta_t = 2 sigmoid(g_t) in (0, 2)
// (the seed's row-vector S_t = S_{t-1} + beta_t k_t^T (v_t - k_t S_{t-1}), stored as (d_v, d_k) here). On
// unit keys beta_t is the NLMS gain of seed 003 (eq. 3.4 with lambda = eps = 0): after the write the
// residual on k_hat_t is (1 - beta_t) e_t, so |1 - beta_t| < 1, a contraction, exactly for beta_t in
// (0, 2); beta_t > 1 overshoots (a negative eigenvalue of I - beta k_hat k_hat^T, seed 003 sec. 3.1).
// Keys and read as DeltaNet's (deltanet/): k_hat = unit(phi(k)), the eq. (11) normalised read, so that
// the two differ only in their write: DeltaNet decays the whole state by beta_t and writes the full
// residual, the delta rule keeps the state and writes beta_t times the residual (delta_write.hpp).
#include "core/rules/delta_write.hpp"
#include "core/rules/mixer_config.hpp"
#include "core/rules/normalised_memory.hpp"

#include <array>

namespace vla {

struct DeltaRuleOptions : FastWeightOptions {};

template <class P> class DeltaRule : public RuleOptions<DeltaRuleOptions> {
 public:
  using storage_t = typename P::storage_t;
  using compute_t = typename P::compute_t;
  static constexpr std::array<std::string_view, 1> names{"delta"};  // the mixer name
  static constexpr Needs needs{.penalty = false, .gate = true};     // beta_t from the gate logit
  static constexpr bool recurrent = true;

  using State = NormalisedMemory<P>;

  using RuleOptions::RuleOptions;
  static DeltaRule from_config(const MixerConfig& cfg) {
    return DeltaRule(Options{{cfg.penalty.eps, MemoryOptions{cfg.renormalise_S, cfg.renorm_threshold}}});
  }

  State init(int batch, int d) const { return State(batch, d, opt_.memory); }

  // beta_t = 2 sigmoid(g_t), in (0, 2) for every finite logit.
  static compute_t gain(const compute_t& g) { return compute_t(2) * sigmoid(g); }

  void step(State& st, const HeadInputs<storage_t>& in, Mat<storage_t>& out, StepRecord<compute_t>* rec) const {
    using C = compute_t;
    const auto [B, d] = begin_step(in, out, rec);
    const C eps = scalar_cast<C>(opt_.eps);
    for (int b = 0; b < B; ++b) {
      const Vec<C> k_feat = elu_plus_one(column<C>(in.k, b));
      const Vec<C> k_hat = unit(k_feat);
      const C beta = gain(scalar_cast<C>(in.gate(0, b)));
      const Vec<C> w = beta * k_hat;
      const auto wr = st.memory.residual_write(b, k_hat, w, column<C>(in.v, b));  // a = 1, b = beta (delta_write.hpp)
      out.col(b) = st.accumulate_and_read(b, k_feat, Vec<storage_t>(in.q.col(b)), eps);
      st.record_write(rec, b, wr, WriteRecord<C>{k_hat, w, C(1)});  // S -> S (I - k_hat (beta k_hat)^T)
    }
  }
};

}  // namespace vla
