#pragma once
// Gated Linear Attention (Yang et al. 2024; seed 004 sec. 5.4, "Definition (GLA State Update)"):
//   S_t = (alpha_t beta_t^T) . S_{t-1} + k_t^T v_t,   o_t = q_t S_t
// in the seed's row-vector form (S (d_k, d_v)); stored (d_v, d_k) as every rule here:
//   S_t = S_{t-1} diag(alpha_t) + v_t k_t^T,   o_t = S_t q_t,   alpha_t = sigmoid(g_t) in (0, 1)^{d_k}
// one decay per key channel, from d_h gate logits per head and token (the layer's gate projection).
// beta_t = 1, as Yang et al. use it in practice, so that the gate matrix
// alpha_t 1^T is the rank-1 form the chunkwise algorithm needs (chunked.hpp). As RetNet and Mamba-2
// (scalar_decay.hpp), q and k enter raw: no feature map, no key sum, no denominator. The paper's
// low-rank gate projection with a temperature (alpha = sigmoid(.)^(1/tau), tau = 16) and its output gate are
// parameterisation outside the recurrence.
#include "core/memory_matrix_manager.hpp"
#include "core/rules/mixer_config.hpp"

#include <array>
#include <stdexcept>
#include <vector>

namespace vla {

struct GlaOptions {};

template <class P> class GlaRule {
 public:
  using storage_t = typename P::storage_t;
  using compute_t = typename P::compute_t;
  using Options = GlaOptions;
  static constexpr std::array<std::string_view, 1> names{"gla"};  // the mixer name
  static constexpr Needs needs{.penalty = false, .gate = true, .gates = Needs::kPerChannel};  // alpha_t: d_h logits
  static constexpr bool recurrent = true;

  struct State {
    MemoryMatrixManager<P> memory;  // S: (B, d, d), (d_v, d_k) per sequence
    // The reverse pass reads S_t (dq_t = S_t^T do_t) and S_{t-1} (the gate's gradient).
    struct Tape {
      std::vector<Mat<storage_t>> S;  // n entries, (d_h, d_h): S_t after step t
      void reserve(int n) { S.reserve(n); }
    };
    void record(Tape& tp) const { tp.S.push_back(memory.S(0)); }
  };

  GlaRule() = default;
  explicit GlaRule(Options opt) : opt_(opt) {}
  static GlaRule from_config(const MixerConfig& cfg) {
    if (cfg.renormalise_S) throw std::invalid_argument("--renormalise: gla has no S renormalisation (its decays alpha_t < 1 bound S)");
    return GlaRule();
  }
  const Options& options() const { return opt_; }

  State init(int batch, int d) const { return State{MemoryMatrixManager<P>(batch, d, d)}; }

  void step(State& st, const HeadInputs<storage_t>& in, Mat<storage_t>& out, StepRecord<compute_t>* rec) const {
    using C = compute_t;
    const auto [B, d] = begin_step(in, out, rec);
    if (in.gate.rows() != d) throw std::invalid_argument("gate: gla reads d_head gate logits per head and token");
    for (int b = 0; b < B; ++b) {
      const Vec<C> alpha = column<C>(in.gate, b).unaryExpr([](const C& g) { return sigmoid(g); });  // (d_k) in (0, 1)
      const Vec<C> k = column<C>(in.k, b), v = column<C>(in.v, b);
      st.memory.S(b) = cast_matrix<storage_t>(Mat<C>(cast_matrix<C>(st.memory.S(b)) * alpha.asDiagonal() + v * k.transpose()));
      out.col(b) = cast_vector<storage_t>(Vec<C>(cast_matrix<C>(st.memory.S(b)) * column<C>(in.q, b)));
      if (rec) {
        rec->stats[b].S_fro = st.memory.frobenius_norm(b);
        rec->writes[b] = WriteRecord<C>{k, Vec<C>(), C(1)};  // dS_t/dS_{t-1}: S -> S diag(alpha_t), not a scalar decay
      }
    }
  }

 private:
  Options opt_;
};

}  // namespace vla
