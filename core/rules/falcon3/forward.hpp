#pragma once
// FALCON-3 (seed 003 sec. 4.4, Algorithm 3): one mini-batch gradient step of the ridge regression loss
// averaged over a sliding window of the last B pairs (eq. 4.9), with the trace-normalised step:
//   S_t = gamma_t S_{t-1} + (eta_t / B_t) sum_{j in W_t} (v_j - S_{t-1} x_j) x_j^T     (eq. 4.13, Alg. 3 line 15)
//   E_bar_t = (1/B_t) sum_{j in W_t} ||x_j||^2                                          (Alg. 3 lines 11, 13)
//   lambda_t = ridge E_bar_t                                    (sec. 4.1's scaled ridge with the window's energy)
//   eta_t = beta_t / (E_bar_t + lambda_t + eps),  eta_t := 0 if the denominator is 0     (Alg. 3 line 14)
//   gamma_t = 1 - min(eta_t lambda_t, 1 - eps_gamma)                    (sec. 4.4's positive-decay recurrence)
//   beta_t = 2 sigmoid(g_t) in (0, 2),  o_t = S_t RMSNorm(q_t)          (read after write, denominator-free)
// with x_j = RMSNorm(k_j), y_j = v_j and W_t, B_t the FIFO window of Algorithm 3 (sliding_window.hpp, which
// holds the memory, the step and the adjoint, with c = 1: the residual write). S stored (d_v, d_k). One gain
// per head and token (Algorithm 3's scalar beta_t): one gate logit from the layer's gate projection. For
// beta_t in (0, 2) the step lies in (0, 2 / L_t), L_t = lambda_max(C_bar_t) + lambda_t <= E_bar_t + lambda_t
// the window loss's smoothness, so every step decreases it (sec. 4.4, Lemma 3.1). With B = 1 this is
// FALCON-2 with one gain for every value channel (tests/train/falcon3_test.cpp).
//
// The ridge multiplier E_bar_t is live here (gradients flow through it), as FALCON-2's ||x_t||^2 is; the
// paper's own implementation detaches it (sec. 4.1's last paragraph), a training choice, not the recurrence.
#include "core/rules/mixer_config.hpp"
#include "core/rules/sliding_window.hpp"

#include <fmt/format.h>

#include <array>
#include <stdexcept>

namespace vla {

template <class P> class Falcon3Rule : public RuleOptions<NlmsOptions> {  // options read: eps, ridge, eps_gamma, window
 public:
  using storage_t = typename P::storage_t;
  using compute_t = typename P::compute_t;
  static constexpr std::array<std::string_view, 1> names{"falcon3"};  // the mixer name
  static constexpr Needs needs{.penalty = false, .gate = true, .gates = 1};  // beta_t from one gate logit
  static constexpr bool recurrent = true;

  using State = SlidingMemory<P>;

  using RuleOptions::RuleOptions;
  static Falcon3Rule from_config(const MixerConfig& cfg) {
    if (cfg.renormalise_S)
      throw std::invalid_argument("--renormalise: falcon3 has no S renormalisation (its ridge decay and normalised step bound S)");
    return Falcon3Rule(Options{cfg.penalty.eps, cfg.falcon});
  }

  State init(int batch, int d) const { return State(batch, d, opt_.falcon.window); }

  // beta = 2 sigmoid(g), in (0, 2) for every finite logit (as FALCON-2's gains).
  static compute_t gain(const compute_t& g) { return compute_t(2) * sigmoid(g); }

  // eta_t, lambda_t, gamma_t from the window's energy: FALCON-2's coefficients (nlms_memory.hpp) with E_bar_t
  // in place of ||x_t||^2 (sec. 4.4: "replace lambda_t throughout by lambda_bar E_bar_t").
  static NlmsCoefficients<compute_t> coefficients(const compute_t& E_bar, const compute_t& beta, const Options& opt) {
    return nlms_coefficients_of_energy<compute_t>(E_bar, Vec<compute_t>::Constant(1, beta), opt);
  }
  // The write's (gamma_t, eta_t / B_t).
  static SlidingCoefficients<compute_t> write_coefficients(const NlmsCoefficients<compute_t>& k, int B_t) {
    return {k.gamma(0), compute_t(k.eta(0) / compute_t(B_t))};
  }

  void step(State& st, const HeadInputs<storage_t>& in, Mat<storage_t>& out, StepRecord<compute_t>* rec) const {
    using C = compute_t;
    const auto [B, d] = begin_step(in, out, rec);
    if (in.gate.rows() != 1)
      throw std::invalid_argument(fmt::format("gate: falcon3 reads 1 gate logit per head and token, got {}", in.gate.rows()));
    for (int b = 0; b < B; ++b) {
      const C beta = gain(scalar_cast<C>(in.gate(0, b)));
      out.col(b) = st.step(b, opt_, column<C>(in.q, b), column<C>(in.k, b), column<C>(in.v, b), C(1),
                           [&](const C& E_bar, int B_t) { return write_coefficients(coefficients(E_bar, beta, opt_), B_t); }, rec);
    }
  }
};

}  // namespace vla
