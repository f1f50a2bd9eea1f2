#pragma once
// DeltaNet as the paper writes it (eq. 4):
//   S_t = beta_t S_{t-1} + (v_t - S_{t-1} k_hat_t) k_hat_t^T,   beta_t = sigmoid(w_beta^T x_t + b_beta)
// with k_hat_t = phi(k_t) / ||phi(k_t)|| (unit keys, as DeltaNet requires for a stable delta rule) and
// the read of eq. (11), so that DeltaNet and VLA differ only in how they write. beta_t is produced by
// the layer's gate projection (one scalar per head and token, a learned linear function of x_t);
// gated = false fixes beta_t = 1 (the "residual correction alone" of Sec. 7.3).
#include "core/rules/delta_write.hpp"
#include "core/rules/mixer_config.hpp"
#include "core/rules/normalised_memory.hpp"

#include <array>

namespace vla {

struct DeltaNetOptions : FastWeightOptions {
  bool gated = true;
};

template <class P> class DeltaNetRule : public RuleOptions<DeltaNetOptions> {
 public:
  using storage_t = typename P::storage_t;
  using compute_t = typename P::compute_t;
  static constexpr std::array<std::string_view, 1> names{"deltanet"};  // the mixer name
  static constexpr Needs needs{.penalty = false, .gate = true};
  static constexpr bool recurrent = true;

  using State = NormalisedMemory<P>;

  using RuleOptions::RuleOptions;
  static DeltaNetRule from_config(const MixerConfig& cfg) {
    return DeltaNetRule(Options{{cfg.penalty.eps, MemoryOptions{cfg.renormalise_S, cfg.renorm_threshold}}, cfg.deltanet_gated});
  }

  State init(int batch, int d) const { return State(batch, d, opt_.memory); }

  void step(State& st, const HeadInputs<storage_t>& in, Mat<storage_t>& out, StepRecord<compute_t>* rec) const {
    using C = compute_t;
    const auto [B, d] = begin_step(in, out, rec);
    const C eps = scalar_cast<C>(opt_.eps);
    for (int b = 0; b < B; ++b) {
      const Vec<C> k_feat = elu_plus_one(cast_vector<C>(Vec<storage_t>(in.k.col(b))));
      const Vec<C> k_hat = unit(k_feat);
      const C beta = opt_.gated ? sigmoid(scalar_cast<C>(in.gate(0, b))) : C(1);
      const auto wr = st.memory.residual_write(b, k_hat, k_hat, cast_vector<C>(Vec<storage_t>(in.v.col(b))), beta);  // a = beta, b = 1 (delta_write.hpp)
      out.col(b) = st.accumulate_and_read(b, k_feat, Vec<storage_t>(in.q.col(b)), eps);
      st.record_write(rec, b, wr, WriteRecord<C>{k_hat, k_hat, beta});  // S -> S (beta I - k_hat k_hat^T)
    }
  }
};

}  // namespace vla
