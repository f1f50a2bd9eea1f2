#pragma once
// Causal softmax attention (paper eq. 2), the reference mixer:
//   o_t = sum_{s<=t} softmax_s(q_t^T k_s / sqrt(d_h)) v_s
// Its "state" is the KV cache, which grows with t; it has no fixed-size memory, so no S, A or
// Jacobian statistics. The softmax subtracts the running maximum before exponentiating.
#include "core/rules/memory_rule.hpp"
#include "core/rules/mixer_config.hpp"

#include <array>

namespace vla {

struct SoftmaxOptions {
  void validate() const {}
};

template <class P> class SoftmaxRule {
 public:
  using storage_t = typename P::storage_t;
  using compute_t = typename P::compute_t;
  using Options = SoftmaxOptions;
  static constexpr std::array<std::string_view, 1> names{"softmax"};  // the mixer name
  static constexpr Needs needs{};
  static constexpr bool recurrent = false;  // the KV cache grows with t

  struct State {
    std::vector<std::vector<Vec<storage_t>>> K, V;  // (B, t, d)
    // The reverse pass keeps nothing: it recomputes the attention weights from q, k (adjoint.hpp).
    struct Tape {
      void reserve(int) {}
    };
    void record(Tape&) const {}
  };

  SoftmaxRule() = default;
  explicit SoftmaxRule(Options) {}
  static SoftmaxRule from_config(const MixerConfig&) { return SoftmaxRule(); }

  State init(int batch, int) const { return State{std::vector<std::vector<Vec<storage_t>>>(batch), std::vector<std::vector<Vec<storage_t>>>(batch)}; }

  void step(State& st, const HeadInputs<storage_t>& in, Mat<storage_t>& out, StepRecord<compute_t>* rec) const {
    using C = compute_t;
    using std::exp;
    using std::sqrt;
    const auto [B, d] = begin_step(in, out, rec);
    const C inv_sqrt_d = C(1) / C(sqrt(C(d)));
    for (int b = 0; b < B; ++b) {
      st.K[b].push_back(in.k.col(b));
      st.V[b].push_back(in.v.col(b));
      const Vec<C> q = cast_vector<C>(Vec<storage_t>(in.q.col(b)));
      const int n = static_cast<int>(st.K[b].size());
      Vec<C> logits(n);
      for (int s = 0; s < n; ++s) logits(s) = q.dot(cast_vector<C>(st.K[b][s])) * inv_sqrt_d;
      const C m = logits.maxCoeff();
      C sum = C(0);
      Vec<C> o = Vec<C>::Zero(d);
      for (int s = 0; s < n; ++s) {
        const C p = exp(C(logits(s) - m));
        sum += p;
        o += p * cast_vector<C>(st.V[b][s]);
      }
      out.col(b) = cast_vector<storage_t>(Vec<C>(o / sum));
    }
  }
};

}  // namespace vla
