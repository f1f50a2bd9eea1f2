#pragma once
// FALCON-2 (seed 003 sec. 4.2): the NLMS-normalised delta rule with per-column gains, one step of online
// gradient descent on the ridge regression loss l_t(S) = 1/2 ||S^T x_t - y_t||^2 + lambda_t/2 ||S||_F^2
// (eq. 3.1) with per-column step sizes (eqs. 4.4-4.5; the paper's column j = our row j, S stored (d_v, d_k)):
//   s_{t,j} = (1 - lambda_t eta_{j,t}) s_{t-1,j} + eta_{j,t} x_t ((y_t)_j - <x_t, s_{t-1,j}>)        (4.5)
//   eta_{j,t} = beta_{j,t} / (||x_t||^2 + lambda_t + eps),   beta_{j,t} = 2 sigmoid(g_{t,j}) in (0, 2)
// with the decay clamped as the paper implements it (gamma_{j,t} = 1 - min(lambda_t eta_{j,t}, 1 - eps_gamma)),
// x_t = RMSNorm(k_t), y_t = v_t, lambda_t = ridge ||x_t||^2 (the scaled formulation of sec. 4.1) and the
// read o_t = S_t RMSNorm(q_t) (read after write, denominator-free). One gain per value channel: d_h gate
// logits per head and token from the layer's gate projection (Needs::kPerChannel). For beta_j in (0, 2)
// each column's step lies in (0, 2 / L_t), L_t = ||x_t||^2 + lambda_t the loss's smoothness, so every
// step decreases l_t (Lemma 3.1; the ledger's falcon2-nlms-descent). The memory, step and adjoint are
// nlms_memory.hpp's, with c = 1 (the residual write).
#include "core/rules/mixer_config.hpp"
#include "core/rules/nlms_memory.hpp"

#include <array>
#include <stdexcept>

namespace vla {

template <class P> class Falcon2Rule : public RuleOptions<NlmsOptions> {
 public:
  using storage_t = typename P::storage_t;
  using compute_t = typename P::compute_t;
  static constexpr std::array<std::string_view, 1> names{"falcon2"};  // the mixer name
  static constexpr Needs needs{.penalty = false, .gate = true, .gates = Needs::kPerChannel};  // beta_{j,t}: d_h logits
  static constexpr bool recurrent = true;

  using State = NlmsMemory<P>;

  using RuleOptions::RuleOptions;
  static Falcon2Rule from_config(const MixerConfig& cfg) {
    if (cfg.renormalise_S)
      throw std::invalid_argument("--renormalise: falcon2 has no S renormalisation (its ridge decay and NLMS step bound S)");
    return Falcon2Rule(Options{cfg.penalty.eps, cfg.falcon});
  }

  State init(int batch, int d) const { return State(batch, d); }

  // beta = 2 sigmoid(g), in (0, 2) for every finite logit.
  static compute_t gain(const compute_t& g) { return compute_t(2) * sigmoid(g); }

  void step(State& st, const HeadInputs<storage_t>& in, Mat<storage_t>& out, StepRecord<compute_t>* rec) const {
    using C = compute_t;
    const auto [B, d] = begin_step(in, out, rec);
    if (in.gate.rows() != d) throw std::invalid_argument("gate: falcon2 reads d_head gate logits per head and token");
    for (int b = 0; b < B; ++b) {
      const Vec<C> beta = column<C>(in.gate, b).unaryExpr([](const C& g) { return gain(g); });  // (d_v) in (0, 2)
      out.col(b) = st.step(b, opt_, column<C>(in.q, b), column<C>(in.k, b), column<C>(in.v, b), beta, C(1), rec);
    }
  }
};

}  // namespace vla
