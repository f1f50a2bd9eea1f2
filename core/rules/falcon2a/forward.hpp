#pragma once
// FALCON-2A (seed 003 sec. 4.3): one gradient step on the inner-product objective
// l_t(S) = -<S^T x_t, y_t> + lambda_t/2 ||S||_F^2 (eq. 4.6), the additive write of linear attention with a
// ridge decay and the NLMS-normalised step:
//   S_t = (1 - eta_t lambda_t) S_{t-1} + eta_t x_t y_t^T                                           (4.7)
//   eta_t = beta_t / (||x_t||^2 + lambda_t + eps),   beta_t = 2 sigmoid(g_t) in (0, 2)              (4.8)
// with the decay clamped as the paper's "Decay positivity" paragraph implements it (gamma_t = 1 -
// min(eta_t lambda_t, 1 - eps_gamma)), x_t = RMSNorm(k_t), y_t = v_t, lambda_t = ridge ||x_t||^2 (sec. 4.1)
// and the read o_t = S_t RMSNorm(q_t) (read after write, denominator-free); S stored (d_v, d_k), so the
// paper's x_t y_t^T is our y_t x_t^T. One gain per head and token (the paper's scalar beta_t): one gate
// logit from the layer's gate projection. FALCON-2's memory, step and adjoint (nlms_memory.hpp) with
// c = 0: no residual, every row with the same gain.
#include "core/rules/mixer_config.hpp"
#include "core/rules/nlms_memory.hpp"

#include <array>
#include <stdexcept>

namespace vla {

template <class P> class Falcon2aRule : public RuleOptions<NlmsOptions> {
 public:
  using storage_t = typename P::storage_t;
  using compute_t = typename P::compute_t;
  static constexpr std::array<std::string_view, 1> names{"falcon2a"};  // the mixer name
  static constexpr Needs needs{.penalty = false, .gate = true};        // beta_t from one gate logit
  static constexpr bool recurrent = true;

  using State = NlmsMemory<P>;

  using RuleOptions::RuleOptions;
  static Falcon2aRule from_config(const MixerConfig& cfg) {
    if (cfg.renormalise_S)
      throw std::invalid_argument("--renormalise: falcon2a has no S renormalisation (its ridge decay bounds S)");
    return Falcon2aRule(Options{cfg.penalty.eps, cfg.falcon});
  }

  State init(int batch, int d) const { return State(batch, d); }

  // beta = 2 sigmoid(g), in (0, 2) for every finite logit.
  static compute_t gain(const compute_t& g) { return compute_t(2) * sigmoid(g); }

  void step(State& st, const HeadInputs<storage_t>& in, Mat<storage_t>& out, StepRecord<compute_t>* rec) const {
    using C = compute_t;
    const auto [B, d] = begin_step(in, out, rec);
    for (int b = 0; b < B; ++b) {
      const Vec<C> beta = Vec<C>::Constant(d, gain(scalar_cast<C>(in.gate(0, b))));  // the same gain for every row
      out.col(b) = st.step(b, opt_, column<C>(in.q, b), column<C>(in.k, b), column<C>(in.v, b), beta, C(0), rec);
    }
  }
};

}  // namespace vla
