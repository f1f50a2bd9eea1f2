#pragma once
// The inputs one attention head sees, precomputed in double so that every precision receives the
// same numbers (each rounded once to its storage type): differences between precisions then come
// from the recurrence alone, not from the projections.
//
// random_head_stream is the Sec. 6.2 / Fig. 4 random-input protocol (analysis/random_protocol.hpp)
// projected in double: q = W_q x, k = W_k x, v = W_v x, u = W_u k, gate = W_g x with max(d_head, 2) rows of
// W_g (protocol_weights: the rows below row 0 drawn after all the others, so that every earlier number
// of the protocol is unchanged). drive() hands a rule the gate rows it reads.
#include "core/rules/memory_rule.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>

namespace vla::analysis {

struct HeadStream {
  int d = 0, T = 0, rank = 1;
  Mat<double> q, k, v;  // (d, T): column t-1 is token t
  Mat<double> u;        // (rank * d, T)
  Mat<double> gate;     // (gate rows, T): row 0 the scalar gate logit; more rows for wider gates
  void validate() const;  // sizes >= 1 and every matrix of the shape above; throws std::invalid_argument
};

HeadStream random_head_stream(int d_head, int T, std::uint64_t seed, int rank = 1);

// The inputs of token t (0-based) rounded to T_storage, batch of one.
template <class S> HeadInputs<S> token_inputs(const HeadStream& s, int t) {
  HeadInputs<S> in;
  in.q = cast_matrix<S>(Mat<double>(s.q.col(t)));
  in.k = cast_matrix<S>(Mat<double>(s.k.col(t)));
  in.v = cast_matrix<S>(Mat<double>(s.v.col(t)));
  in.u = cast_matrix<S>(Mat<double>(s.u.col(t)));
  in.gate = cast_matrix<S>(Mat<double>(s.gate.col(t)));
  return in;
}

// The inputs of token t as `Rule` reads them: token_inputs with the stream's first gate rows, as many as
// the rule reads (Needs::gate_rows); throws naming the gate when the stream has fewer.
template <class Rule> HeadInputs<typename Rule::storage_t> rule_inputs(const HeadStream& s, int t) {
  using S = typename Rule::storage_t;
  const int g = Rule::needs.gate_rows(s.d);
  if (s.gate.rows() < g)
    throw std::invalid_argument(fmt::format("gate: the stream has {} gate rows per token, the rule reads {}", s.gate.rows(), g));
  HeadInputs<S> in = token_inputs<S>(s, t);
  if (g > 0) in.gate = Mat<S>(in.gate.topRows(g));
  return in;
}

// Runs `rule` over the stream, one sequence; calls f(t, state, out, record) after each step
// (t 1-based, out (d, 1) in storage, record in compute type).
template <class Rule, class F> void drive(const Rule& rule, const HeadStream& s, F&& f) {
  using S = typename Rule::storage_t;
  using C = typename Rule::compute_t;
  s.validate();
  auto state = rule.init(1, s.d);
  Mat<S> out;
  StepRecord<C> rec;
  for (int t = 0; t < s.T; ++t) {
    rule.step(state, rule_inputs<Rule>(s, t), out, &rec);
    f(t + 1, state, out, rec);
  }
}

}  // namespace vla::analysis
