#pragma once
// No silent wrong answer: a value that is not finite (an overflow, 0/0, inf - inf) is caught in the
// step where it first appears and named, never passed on as a finite number. Two halves:
//   - the rules propagate: a quantity whose overflow the next operation would hide returns NaN (the
//     eq. 11 read with an infinite normaliser phi(q)^T z gives o_t = NaN, not S phi(q) / inf = 0;
//     normalised_memory.hpp), so every failure reaches the state or the output;
//   - first_non_finite looks, after each step, at everything the step produced in the order it
//     produces it: its inputs as stored (the projections q, k, v, u and the gate logit, which can
//     overflow a 16-bit storage format), the state it wrote (S_t, A_t, z_t: what the rule holds) and
//     its output o_t.
// MixerLayer (core/layers/mixer_layer.hpp) checks every step and throws NonFiniteError; so do
// layer_forward, `vla layer-forward` and `vla stability`. The precision atlas records the onset
// instead (analysis/atlas_trajectory.hpp), through the same first_non_finite_state.
#include "core/rules/memory_rule.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <string_view>

namespace vla {

// The first of S_t, A_t, z_t (those the state holds) and o_t of sequence b that is not finite, or
// nullptr. `out` is the step's output (d_h, B).
template <class State, class S> const char* first_non_finite_state(const State& st, int b, const Mat<S>& out) {
  if constexpr (requires { st.memory.S(b); })
    if (!all_finite(st.memory.S(b))) return "S_t";
  if constexpr (requires { st.tracker.A(b); })
    if (!all_finite(st.tracker.A(b))) return "A_t";
  if constexpr (requires { st.z[b]; })
    if (!all_finite(st.z[b])) return "z_t";
  if (!all_finite(out.col(b))) return "o_t";
  return nullptr;
}

// The same, after the step's inputs (q_t, k_t, v_t, u_t, the gate logit g_t, as stored).
template <class State, class S>
const char* first_non_finite(const State& st, int b, const HeadInputs<S>& in, const Mat<S>& out) {
  if (!all_finite(in.q.col(b))) return "q_t";
  if (!all_finite(in.k.col(b))) return "k_t";
  if (!all_finite(in.v.col(b))) return "v_t";
  if (in.u.size() && !all_finite(in.u.col(b))) return "u_t";
  if (in.gate.size() && !all_finite(in.gate.col(b))) return "g_t";
  return first_non_finite_state(st, b, out);
}

// A step produced a non-finite value: where (1-based step, sequence, head; head -1: the layer's output,
// which mixes the heads), what, in which precision.
class NonFiniteError : public std::runtime_error {
 public:
  NonFiniteError(int step, int sequence, int head, std::string quantity, std::string_view precision)
      : std::runtime_error(fmt::format(
            "a non-finite value: {} at step {} (sequence {}{}) in {}: the run left the precision's range, from "
            "an input scale the rule cannot carry in it or a recurrence that diverges (docs/recurrences.md, \"Scale\")",
            quantity, step, sequence, head < 0 ? std::string() : fmt::format(", head {}", head), precision)),
        step_(step), sequence_(sequence), head_(head), quantity_(std::move(quantity)) {}
  int step() const { return step_; }
  int sequence() const { return sequence_; }
  int head() const { return head_; }
  const std::string& quantity() const { return quantity_; }

 private:
  int step_, sequence_, head_;
  std::string quantity_;
};

}  // namespace vla
