#pragma once
// FALCON-3A (seed 003 sec. 4.5): one step on the inner-product loss averaged over a sliding window of the
// last B pairs (eq. 4.16), in the paper's decoupled parameterisation of plasticity and forgetting:
//   N_bar_t = (1/B_t) sum_{j in W_t} v_j x_j^T               (the paper's x_j v_j^T; S stored (d_v, d_k))
//   E_bar_t = (1/B_t) sum_{j in W_t} ||x_j||^2,  rho_t = beta_t / (E_bar_t + eps)                    (4.18)
//   alpha_t = (1 - eps_gamma) sigmoid(g_{t,1}),  gamma_t = 1 - alpha_t in (eps_gamma, 1)             (4.19)
//   S_t = gamma_t S_{t-1} + rho_t N_bar_t,  o_t = S_t RMSNorm(q_t)                   (4.20), read after write
// with x_j = RMSNorm(k_j) and W_t, B_t the FIFO window of Algorithm 3 (sliding_window.hpp: the memory, the
// step and the adjoint, with c = 0: no residual). Two gate logits per head and token from the layer's gate
// projection: g_{t,0} the gain beta_t = 2 sigmoid(g_{t,0}), g_{t,1} the decay logit alpha~_t of eq. (4.19).
// The paper asks only beta_t > 0; 2 sigmoid is FALCON-2A's gain (beta = 1 at g = 0), so that at B = 1 the
// write coefficient rho_t is FALCON-2A's eta_t without its ridge. eps is the mixers' one eps (eq. 4.18's
// eps_eta). There is no ridge: the decay is its own logit (sec. 4.5, "Why the naive (eta, lambda)
// parameterization is poor"), and --ridge does not reach this rule. Where the denominator vanishes
// (E_bar_t = 0 with eps = 0) the step is the paper's forced no-op, rho_t = alpha_t = 0 (gamma_t = 1).
#include "core/rules/mixer_config.hpp"
#include "core/rules/sliding_window.hpp"

#include <fmt/format.h>

#include <array>
#include <stdexcept>

namespace vla {

template <class P> class Falcon3aRule : public RuleOptions<NlmsOptions> {  // options read: eps, eps_gamma, window (the ridge is not read)
 public:
  using storage_t = typename P::storage_t;
  using compute_t = typename P::compute_t;
  static constexpr std::array<std::string_view, 1> names{"falcon3a"};  // the mixer name
  static constexpr Needs needs{.penalty = false, .gate = true, .gates = 2};  // g_0 -> beta_t, g_1 -> alpha_t
  static constexpr bool recurrent = true;

  using State = SlidingMemory<P>;

  using RuleOptions::RuleOptions;
  static Falcon3aRule from_config(const MixerConfig& cfg) {
    if (cfg.renormalise_S)
      throw std::invalid_argument("--renormalise: falcon3a has no S renormalisation (its decay and normalised write bound S)");
    return Falcon3aRule(Options{cfg.penalty.eps, cfg.falcon});
  }

  State init(int batch, int d) const { return State(batch, d, opt_.falcon.window); }

  // beta = 2 sigmoid(g_0) > 0 (eq. 4.18 asks beta_t > 0).
  static compute_t gain(const compute_t& g) { return compute_t(2) * sigmoid(g); }

  // rho_t (4.18) and alpha_t (4.19) from the window's energy and the two logits.
  struct Coefficients {
    compute_t den, rho, alpha;  // E_bar + eps; beta / den; (1 - eps_gamma) sigmoid(g_1); rho = alpha = 0 if den = 0
  };
  static Coefficients coefficients(const compute_t& E_bar, const compute_t& beta, const compute_t& g1, const Options& opt) {
    using C = compute_t;
    Coefficients k{C(E_bar + scalar_cast<C>(opt.eps)), C(0), C(0)};
    if (k.den > C(0)) {
      k.rho = beta / k.den;
      k.alpha = (C(1) - scalar_cast<C>(opt.falcon.eps_gamma)) * sigmoid(g1);
    }
    return k;
  }
  // The write's (gamma_t, rho_t / B_t): rho_t N_bar_t = (rho_t / B_t) sum_j v_j x_j^T.
  static SlidingCoefficients<compute_t> write_coefficients(const Coefficients& k, int B_t) {
    return {compute_t(compute_t(1) - k.alpha), compute_t(k.rho / compute_t(B_t))};
  }

  void step(State& st, const HeadInputs<storage_t>& in, Mat<storage_t>& out, StepRecord<compute_t>* rec) const {
    using C = compute_t;
    const auto [B, d] = begin_step(in, out, rec);
    if (in.gate.rows() != 2)
      throw std::invalid_argument(
          fmt::format("gate: falcon3a reads 2 gate logits per head and token (the gain and the decay), got {}", in.gate.rows()));
    for (int b = 0; b < B; ++b) {
      const C beta = gain(scalar_cast<C>(in.gate(0, b))), g1 = scalar_cast<C>(in.gate(1, b));
      out.col(b) = st.step(b, opt_, column<C>(in.q, b), column<C>(in.k, b), column<C>(in.v, b), C(0),
                           [&](const C& E_bar, int B_t) { return write_coefficients(coefficients(E_bar, beta, g1, opt_), B_t); }, rec);
    }
  }
};

}  // namespace vla
