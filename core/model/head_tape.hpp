#pragma once
// What the backward through time of one head needs from its forward (the "tape"): each rule says
// what it keeps, as its State::Tape and State::record (core/rules/<rule>/forward.hpp); the linear-
// attention family keeps S_t and z_t (core/rules/normalised_memory.hpp), VLA A_t besides, softmax
// nothing (its backward recomputes the attention weights).
//
// Store vs recompute. The backward at step t needs S_{t-1} (the residual e_t = v_t - S_{t-1} k_hat_t
// and dS_t/dk_hat), S_t (the read o_t = S_t phi(q_t) / den), z_t, and for VLA A_{t-1} and A_t
// (Alg. 1 lines 12-19). All of these are STORED, one (d_h, d_h) matrix per step and state:
//  - recomputing A_{t-1} from A_t backwards means undoing Sherman-Morrison, i.e. adding back
//    z z^T / delta: the inverse update divides by a delta that can be as small as eps (the clamp of
//    line 13) and amplifies the rounding error of A_t by 1/delta per step, so it is numerically unstable;
//  - recomputing S_{t-1} = (S_t - v_t alpha_hat^T)(I - k_hat alpha_hat^T)^{-1} inverts a map whose
//    singular value can be ~0 (eq. 14), equally unstable;
//  - the cost is small: 2 * T * d_h^2 scalars per head, e.g. T = 73 (MQAR n = 24), d_h = 32:
//    150k floats = 0.6 MB per head, 4.7 MB per sequence for L = 2, H = 4, and a worker thread holds
//    only the sequence it is differentiating.
// Everything cheap (k_hat, u, alpha_hat, delta, the read denominator) is recomputed from the stored
// projections q, k, v, u_raw in the backward, by the same formulas as the rule's forward.
#include "core/rules/memory_rule.hpp"

namespace vla::model {

// The tape of one head of one sequence under Rule: n entries per stored state.
template <class Rule> using HeadTape = typename Rule::State::Tape;

}  // namespace vla::model
