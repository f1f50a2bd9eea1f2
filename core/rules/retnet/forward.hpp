#pragma once
// RetNet's retention in its scalar form (Sun et al. 2023; seed 004, sec. 5.2, "Definition (RetNet
// Retention)"):
//   S_t = gamma S_{t-1} + k_t^T v_t,   o_t = q_t S_t          (row vectors, as the seed writes them)
// with a constant decay gamma in (0, 1), the same at every step and for every input. S is stored as
// (d_v, d_k) like every rule here, so in column vectors S_t = gamma S_{t-1} + v_t k_t^T, o_t = S_t q_t.
// Unrolled (the seed's parallel form O = (Q K^T . D) V, D_ts = gamma^(t-s) for s <= t):
//   o_t = sum_{s<=t} gamma^(t-s) (k_s . q_t) v_s.
// RetNet reads as the seed defines it, NOT by the eq. (11) normalised read the paper's rules share:
// q and k enter raw (no feature map phi, no running key sum z, no denominator); the memory, its step
// and its adjoint are the scalar-decay family's (core/rules/scalar_decay.hpp). The seed's GroupNorm
// (its Fig. 3a) acts on the layer's output, outside the recurrence, and is not part of the rule.
// The seed gives each head its own gamma_h = 1 - 2^-(5+h); a rule here has one gamma for all heads
// (a step does not know its head), the seed's first head's by default.
#include "core/rules/mixer_config.hpp"
#include "core/rules/scalar_decay.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <stdexcept>

namespace vla {

struct RetNetOptions {
  double gamma = 1.0 - 1.0 / 32;  // the decay, 1 - 2^-5 (seed 004 sec. 5.2, head h = 0)
  void validate() const {
    if (!(gamma > 0.0 && gamma < 1.0))
      throw std::invalid_argument(fmt::format("gamma: RetNet's decay must lie in (0, 1), got {}", gamma));
  }
};

template <class P> class RetNetRule : public RuleOptions<RetNetOptions> {
 public:
  using storage_t = typename P::storage_t;
  using compute_t = typename P::compute_t;
  static constexpr std::array<std::string_view, 1> names{"retnet"};  // the mixer name
  static constexpr Needs needs{};
  static constexpr bool recurrent = true;

  using State = ScalarDecayMemory<P>;

  using RuleOptions::RuleOptions;
  static RetNetRule from_config(const MixerConfig& cfg) {
    if (cfg.renormalise_S)
      throw std::invalid_argument("--renormalise: retnet has no S renormalisation (its decay gamma < 1 bounds S)");
    return RetNetRule();
  }

  State init(int batch, int d) const { return State(batch, d); }

  void step(State& st, const HeadInputs<storage_t>& in, Mat<storage_t>& out, StepRecord<compute_t>* rec) const {
    using C = compute_t;
    const int B = begin_step(in, out, rec).first;
    const C gamma = scalar_cast<C>(opt_.gamma);
    for (int b = 0; b < B; ++b)
      out.col(b) = st.step(b, column<C>(in.q, b), column<C>(in.k, b), column<C>(in.v, b), gamma, rec);
  }
};

}  // namespace vla
