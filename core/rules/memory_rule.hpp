#pragma once
// What every memory rule (every mixer) shares: the shape of one step's inputs, the per-step
// statistics, the write record the analyses read, and the normalised read of eq. (11).
//
// A memory rule is a class template over a Precision<Storage, Compute> with this surface:
//
//   static constexpr std::string_view name;          // "vla", "linear", "deltanet", "softmax", ...
//   static constexpr Needs needs;                     // which projections of x_t the layer must make
//   struct Options;                                   // the rule's hyper-parameters (validated)
//   struct State;                                     // batched state, reset for every sequence
//   State init(int batch, int d_head) const;          // the state before the first token
//   void step(State&, const HeadInputs<storage_t>&,   // one token for every sequence of the batch:
//             Mat<storage_t>& out,                    //   out is (d_head, B), column b = o_t of seq b
//             StepRecord* record) const;              //   statistics and write record, optional
//
// The layer (core/layers/mixer_layer.hpp) makes the projections and calls step for t = 1..T; the
// analyses call step directly on hand-made inputs. A new rule joins by adding one header here and
// one line in core/rules/registry.hpp.
#include "core/feature_map.hpp"
#include "core/precision.hpp"

#include <limits>
#include <vector>

namespace vla {

// Which projections of x_t a rule reads. q, k, v are always made.
struct Needs {
  bool penalty = false;  // u_raw = W_u k_raw (VLA's penalty directions), rank * d_head rows
  bool gate = false;     // g = w_beta^T x_t + b_beta (DeltaNet's scalar gate logit)
};

// One token's projections for a batch of B sequences; column b belongs to sequence b.
template <class T> struct HeadInputs {
  Mat<T> q;     // (d_head, B)  W_q x_t + b_q, before any feature map
  Mat<T> k;     // (d_head, B)  W_k x_t + b_k, the raw key k_raw
  Mat<T> v;     // (d_head, B)  W_v x_t + b_v
  Mat<T> u;     // (rank * d_head, B) W_u k_raw + b_u, only when needs.penalty
  Vec<T> gate;  // (B)          gate logit, only when needs.gate
};

inline constexpr double kNotApplicable = std::numeric_limits<double>::quiet_NaN();

// Per-step statistics of one sequence (||S_t||_F, ||A_t||_F, delta_t, ||e_t||: the trace columns).
// Quantities a rule does not have are NaN.
struct StepStats {
  double S_fro = kNotApplicable;   // ||S_t||_F after the step
  double A_fro = kNotApplicable;   // ||A_t||_F after the step (VLA)
  double delta = kNotApplicable;   // Sherman-Morrison denominator before any guard (VLA, rank 1;
                                   // for rank r the smallest LDLT pivot of I + U^T A U)
  double e_norm = kNotApplicable;  // ||e_t|| = ||v_t - S_{t-1} k_t||, the prediction residual
  bool guard_fired = false;        // the delta guard (clamp or skip) changed the update
  bool renormalised = false;       // MemoryMatrixManager rescaled S_t
};

// The linear map a step applies to its memory, S_t = decay * S_{t-1} - (S_{t-1} k_read) w^T + ...,
// i.e. dS_t/dS_{t-1} acts as S -> S (decay I - k_read w^T). For VLA k_read = k_hat, w = alpha_hat,
// decay = 1 (eq. 14; the paper writes the transpose I - alpha_hat k_hat^T, same singular values).
// Linear attention has w = 0 (the map is the identity); softmax has no fixed-size memory.
template <class T> struct WriteRecord {
  Vec<T> k_read;   // (d_head) the key the residual reads with
  Vec<T> w;        // (d_head) the write direction (alpha_hat for VLA); empty when there is none
  T decay = T(1);  // scalar decay of the old state (DeltaNet's beta)
};

template <class T> struct StepRecord {
  std::vector<StepStats> stats;        // (B)
  std::vector<WriteRecord<T>> writes;  // (B), in the compute type
};

// Eq. (11) / Alg. 1 lines 24-26: o = S phi(q) / max(phi(q)^T z, eps), with z = sum_{s<=t} phi(k_s).
template <class C>
inline Vec<C> normalised_read(const Mat<C>& S, const Vec<C>& q_feat, const Vec<C>& z, const C& eps) {
  // max(dot, eps) written so that a NaN denominator stays NaN (std::max would hide it).
  const C dot = q_feat.dot(z);
  const C den = dot < eps ? eps : dot;
  return (S * q_feat) / den;
}

}  // namespace vla
