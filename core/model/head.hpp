#pragma once
// One head of a memory rule over one sequence, forward and backward side by side:
//   head_forward    the rule's own step (core/rules/<rule>/forward.hpp) for t = 1..n, state reset,
//                   recording the rule's tape (head_tape.hpp)
//   head_backward   the reverse pass t = n..1, written once for every rule: Adjoint<Rule>
//                   (core/rules/<rule>/adjoint.hpp) carries the state's adjoints (dS, dz, dA) from
//                   step t to t - 1 and gives row t of the gradients
// on raw per-token inputs: q, k, v (n, d_h), u_raw (n, d_h) and the gate logits g (n, gate rows) where the rule
// reads them (memory_rule.hpp, HeadSequence). The model's mixer (mixer.hpp) runs every head through
// these; the GPU tests compare the CUDA kernels against them in double. With next_latent both run the
// rule on the aligned sequence (next_latent.hpp) and map its outputs and gradients back.
#include "core/model/head_tape.hpp"
#include "core/model/next_latent.hpp"
#include "core/rules/memory_rule.hpp"

namespace vla::model {

// o_t for every token into O (n, d_h); the tape of the run into tape.
template <class Rule, class T>
void head_forward(const Rule& rule, const HeadSequence<T>& x, Mat<T>& O, HeadTape<Rule>& tape, bool next_latent = false) {
  static_assert(std::is_same_v<T, typename Rule::storage_t>);
  const int n = static_cast<int>(x.q.rows()), d = static_cast<int>(x.q.cols());
  if (next_latent && n > 0) {
    Mat<T> O_aligned;
    head_forward(rule, next_latent_inputs(x), O_aligned, tape);
    O = next_latent_outputs(O_aligned, d);
    return;
  }
  auto st = rule.init(1, d);
  tape.reserve(n);
  O.resize(n, d);
  HeadInputs<T> in;
  Mat<T> out;
  for (int t = 0; t < n; ++t) {
    in.q = x.q.row(t).transpose();  // (d_h, 1)
    in.k = x.k.row(t).transpose();
    in.v = x.v.row(t).transpose();
    if constexpr (Rule::needs.penalty) in.u = x.u.row(t).transpose();
    if constexpr (Rule::needs.gate) in.gate = x.g.row(t).transpose();  // (gate_rows, 1)
    rule.step(st, in, out, nullptr);
    O.row(t) = out.col(0).transpose();
    st.record(tape);
  }
}

// dL/d of every input of x from dO (n, d_h) = dL/do_t and the forward's tape.
template <class Rule, class T>
HeadGrads<T> head_backward(const Rule& rule, const HeadSequence<T>& x, const HeadTape<Rule>& tape, const Mat<T>& dO,
                           bool next_latent = false) {
  static_assert(std::is_same_v<T, typename Rule::storage_t> && std::is_same_v<T, typename Rule::compute_t>,
                "the reverse pass runs in one scalar type: storage = compute");
  const int n = static_cast<int>(x.q.rows()), d = static_cast<int>(x.q.cols());
  if (next_latent && n > 0)  // token 1's output is the constant 0: dO's first row reaches nothing
    return next_latent_grads(head_backward(rule, next_latent_inputs(x), tape, Mat<T>(dO.bottomRows(n - 1))), n, d,
                             Rule::needs.gate_rows(d));
  HeadGrads<T> g(n, d, Rule::needs.gate_rows(d));
  Adjoint<Rule> adj(rule, d);  // the adjoints of the state after the last token: zero
  if constexpr (Rule::recurrent) {
    for (int t = n - 1; t >= 0; --t) adj.step(t, x, tape, dO, g);
  } else {
    adj.sequence(x, dO, g);
  }
  return g;
}

// Both, for a caller that has the raw inputs and dL/do (the GPU tests' reference, the gradient checks).
template <class T> struct HeadResult {
  Mat<T> O;      // (n, d_h) the forward's outputs
  HeadGrads<T> grad;
};
template <class Rule, class T>
HeadResult<T> head_forward_backward(const Rule& rule, const HeadSequence<T>& x, const Mat<T>& dO, bool next_latent = false) {
  Mat<T> O;
  HeadTape<Rule> tape;
  head_forward(rule, x, O, tape, next_latent);
  return {std::move(O), head_backward(rule, x, tape, dO, next_latent)};
}

}  // namespace vla::model
