#pragma once
// What every memory rule (every mixer) shares: the shape of one step's inputs, the per-step
// statistics, the write record the analyses read, and the shapes of the reverse (adjoint) pass.
//
// A rule is one folder, core/rules/<rule>/, and one class template over a Precision<Storage, Compute>:
//
//   forward.hpp   the rule's Options and class (deriving from RuleOptions<Options>, below):
//     static constexpr std::array names;               // the mixer names it answers to ("linear";
//                                                      //   VLA: "vla", "vla-v2", ..., its variants)
//     static Rule from_config(const MixerConfig&);      // built from the command line's knobs
//     static constexpr Needs needs;                     // which projections of x_t the layer must make
//     static constexpr bool recurrent;                  // a fixed-size state S (false: softmax's KV cache)
//     struct State;                                     // batched state, reset for every sequence, with
//       struct Tape; void record(Tape&) const;          //   what the reverse pass keeps of each step
//     State init(int batch, int d_head) const;          // the state before the first token
//     void step(State&, const HeadInputs<storage_t>&,   // one token for every sequence of the batch:
//               Mat<storage_t>& out,                    //   out is (d_head, B), column b = o_t of seq b
//               StepRecord* record) const;              //   statistics and write record, optional
//   adjoint.hpp   Adjoint<Rule>: the adjoint of one step, step(t, ...), carrying the state's adjoints
//                 from t to t - 1 (the loop over t = T-1..0 is core/model/head.hpp, written once);
//                 a rule that is not recurrent gives the whole sequence's adjoint, sequence(...)
//   gpu.hpp       gpu_kernel(rule): the CUDA path that serves the rule as configured, with the kernel's
//                 parameters (core/rules/gpu_kernel.hpp), or none
//   rule.hpp      includes the three; core/rules/registry.hpp lists the rule once.
//
// The layer (core/layers/mixer_layer.hpp) makes the projections and calls step for t = 1..T; the
// analyses call step directly on hand-made inputs; training runs core/model/head.hpp.
#include "core/feature_map.hpp"
#include "core/precision.hpp"

#include <limits>
#include <utility>
#include <vector>

namespace vla {

// What every rule class holds the same way: its options, validated once when the rule is made (where the
// options have a validate()), and read through options(). A rule derives from RuleOptions<its Options>
// and inherits the constructor: `explicit Rule(Options)` (and the default rule, of default options).
template <class Opt> class RuleOptions {
 public:
  using Options = Opt;
  RuleOptions() = default;
  explicit RuleOptions(Options opt) : opt_(std::move(opt)) {
    if constexpr (requires { opt_.validate(); }) opt_.validate();
  }
  const Options& options() const { return opt_; }

 protected:
  Options opt_;
};

// Which projections of x_t a rule reads. q, k, v are always made.
struct Needs {
  static constexpr int kPerChannel = -1;  // `gates` for one logit per channel of the head (d_head)
  bool penalty = false;  // u_raw = W_u k_raw (VLA's penalty directions), rank * d_head rows
  bool gate = false;     // g = W_g x_t + b_g, gate logits (DeltaNet's beta, Mamba-2's decay, ...)
  int gates = 1;         // logits per head when gate: 1 (a scalar gate), 2 (Gated DeltaNet's alpha and
                         // beta) or kPerChannel (GLA's vector gate: d_head logits)
  // The rows of g per head: what W_g holds per head, and HeadInputs::gate's rows.
  constexpr int gate_rows(int d_head) const { return !gate ? 0 : gates == kPerChannel ? d_head : gates; }
};

// One token's projections for a batch of B sequences; column b belongs to sequence b.
template <class T> struct HeadInputs {
  Mat<T> q;     // (d_head, B)  W_q x_t + b_q, before any feature map
  Mat<T> k;     // (d_head, B)  W_k x_t + b_k, the raw key k_raw
  Mat<T> v;     // (d_head, B)  W_v x_t + b_v
  Mat<T> u;     // (rank * d_head, B) W_u k_raw + b_u, only when needs.penalty
  Mat<T> gate;  // (gate_rows, B) gate logits, only when needs.gate (Needs::gate_rows)
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
// Maps of another form: S -> S M with a general M (per-channel decays, a rank-B window) carry M itself;
// maps that no single right factor describes (one matrix per row of S, or a write that reads the state
// nonlinearly) are marked not exact, and the analyses that need the map refuse the rule.
template <class T> struct WriteRecord {
  Vec<T> k_read;   // (d_head) the key the residual reads with
  Vec<T> w;        // (d_head) the write direction (alpha_hat for VLA); empty when there is none
  T decay = T(1);  // scalar decay of the old state (DeltaNet's beta)
  Mat<T> M = {};   // (d_head, d_head) when the map is S -> S M with M not decay I - k_read w^T (GLA's, MetaLA's
                   // and GSA's diag(alpha_t); FALCON-3's gamma I - w sum_j x_j x_j^T): M itself; else empty
  bool exact = true;  // false: no (d_head, d_head) M maps the step (FALCON-2's per-channel rows, MVA's levels
                      // that write keys read from the memory); the fields above are then a placeholder
};

template <class T> struct StepRecord {
  std::vector<StepStats> stats;        // (B)
  std::vector<WriteRecord<T>> writes;  // (B), in the compute type
};

// Column b (sequence b) of one of a step's (d_h, B) inputs, in the compute type.
template <class C, class S> Vec<C> column(const Mat<S>& m, int b) { return cast_vector<C>(Vec<S>(m.col(b))); }

// What every rule's step does before its per-sequence loop: out sized (d_h, B), the record (when
// asked for) reset to B empty entries. Returns {B, d_h}, read from the keys (d_h, B).
template <class S, class C> std::pair<int, int> begin_step(const HeadInputs<S>& in, Mat<S>& out, StepRecord<C>* rec) {
  const int B = static_cast<int>(in.k.cols());
  const int d = static_cast<int>(in.k.rows());
  out.resize(d, B);
  if (rec) {
    rec->stats.assign(B, {});
    rec->writes.assign(B, {});
  }
  return {B, d};
}

// One head of ONE sequence, all n tokens, one row per token: what the reverse pass reads.
template <class T> struct HeadSequence {
  Mat<T> q, k, v;  // (n, d_h) as HeadInputs: q and k before the feature map
  Mat<T> u;        // (n, rank * d_h) u_raw, rules with needs.penalty; else empty
  Mat<T> g;        // (n, gate_rows) gate logits, rules with needs.gate; else empty
};

// dL/d of every HeadSequence input, same shapes; du, dg stay zero where a rule does not read u, g.
template <class T> struct HeadGrads {
  Mat<T> dq, dk, dv, du;
  Mat<T> dg;  // (n, gate_rows)
  HeadGrads(int n, int d, int gate_rows = 1)
      : dq(Mat<T>::Zero(n, d)), dk(Mat<T>::Zero(n, d)), dv(Mat<T>::Zero(n, d)), du(Mat<T>::Zero(n, d)),
        dg(Mat<T>::Zero(n, gate_rows)) {}
};

// The adjoint of a rule's step, specialised in core/rules/<rule>/adjoint.hpp. Constructed as
// Adjoint<Rule>(rule, d_h) with the carried adjoints of the state after the last token (zero); then
//   void step(int t, const HeadSequence<T>&, const typename Rule::State::Tape&, const Mat<T>& dO,
//             HeadGrads<T>&)
// turns the adjoints of the state after step t into those of the state before it and writes row t of
// the gradients, from dO (n, d_h) = dL/do, in the compute type (which equals storage: core/model/head.hpp).
template <class Rule> struct Adjoint;

}  // namespace vla
