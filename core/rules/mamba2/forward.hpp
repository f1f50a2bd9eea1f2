#pragma once
// Mamba-2's SSD layer in its scalar form (Dao and Gu 2024; seed 004, sec. 5.3, "Definition (SSD
// Layer)"), in the seed's attention notation:
//   S_t = gamma_t S_{t-1} + k_t^T v_t,   o_t = q_t S_t,   gamma_t = sigmoid(w_a^T x_t + b_a)
// a decay that is a scalar function of the input ("typically a_t = sigma(w_a^T x_t)", the seed's
// choice, taken here), shared by all of a head's state: A_t = gamma_t I. gamma_t comes from the
// layer's gate projection (one logit per head and token, as DeltaNet's beta_t). Unrolled (the seed's
// parallel dual O = (L . Q K^T) V with L_ts = prod_{s < r <= t} gamma_r for s <= t):
//   o_t = sum_{s<=t} (prod_{r=s+1..t} gamma_r) (k_s . q_t) v_s.
// As RetNet (a constant gamma), q and k enter raw, and the memory, its step and its adjoint are the
// scalar-decay family's (core/rules/scalar_decay.hpp). The rest of the Mamba-2 block (the SiLU output
// gate, the convolution, the normalisation) lies outside the recurrence and is not part of the rule.
#include "core/rules/mixer_config.hpp"
#include "core/rules/scalar_decay.hpp"

#include <array>
#include <stdexcept>

namespace vla {

struct Mamba2Options {};

template <class P> class Mamba2Rule : public RuleOptions<Mamba2Options> {
 public:
  using storage_t = typename P::storage_t;
  using compute_t = typename P::compute_t;
  static constexpr std::array<std::string_view, 1> names{"mamba2"};  // the mixer name
  static constexpr Needs needs{.penalty = false, .gate = true};
  static constexpr bool recurrent = true;

  using State = ScalarDecayMemory<P>;

  using RuleOptions::RuleOptions;
  static Mamba2Rule from_config(const MixerConfig& cfg) {
    if (cfg.renormalise_S)
      throw std::invalid_argument("--renormalise: mamba2 has no S renormalisation (its decay gamma_t < 1 bounds S)");
    return Mamba2Rule();
  }

  State init(int batch, int d) const { return State(batch, d); }

  void step(State& st, const HeadInputs<storage_t>& in, Mat<storage_t>& out, StepRecord<compute_t>* rec) const {
    using C = compute_t;
    const int B = begin_step(in, out, rec).first;
    for (int b = 0; b < B; ++b) {
      const C gamma = sigmoid(scalar_cast<C>(in.gate(0, b)));  // gamma_t in (0, 1)
      out.col(b) = st.step(b, column<C>(in.q, b), column<C>(in.k, b), column<C>(in.v, b), gamma, rec);
    }
  }
};

}  // namespace vla
