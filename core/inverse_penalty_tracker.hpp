#pragma once
// InversePenaltyTracker (spec 001): A_t = M_t^{-1} for the penalty M_t = lambda0 I + sum_s U_s U_s^T
// (eq. 8, eq. 15), kept as a batched (B, d, d) state and updated without any inversion.
//
// Rank 1 (Alg. 1 lines 12-17, eq. 9):
//   z = A u,  delta = 1 + u^T z,  A <- A - z z^T / delta,  and every `refresh_period` steps A += eta I.
// Rank r (spec 001 "rank 1 or r"), the Woodbury identity for U (d x r):
//   Z = A U,  C = I_r + U^T Z,  A <- A - Z C^{-1} Z^T   (C = L D L^T; its pivots play delta's role).
//
// Guard on delta. In exact arithmetic delta >= 1 because A is positive definite; in finite
// precision A can lose definiteness and delta can approach or cross zero. Two policies exist:
//   DeltaPolicy::Clamp      Alg. 1 line 13: delta <- max(delta, eps), then update.   [default]
//   DeltaPolicy::SkipAddEps spec 001: if |delta| < eps, skip the update and add eps I to A.
// The default everywhere is Clamp (the paper's Algorithm 1 is the reference dynamics); the 001
// policy is chosen with `--delta-policy skip` (docs/recurrences.md).
//
// Refresh. Alg. 1 line 16 adds eta I (eta = 1e-3) when t mod 20 == 0. Spec 001 injects eps I every
// K steps: that is the same mechanism with eta = eps, so both are this one option pair.
#include "core/knob.hpp"
#include "core/precision.hpp"

#include <Eigen/Cholesky>

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <stdexcept>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace vla {

enum class DeltaPolicy { Clamp, SkipAddEps };

// The policies' names on the command line and in checkpoints and summaries (core/knob.hpp).
constexpr std::array<std::pair<std::string_view, DeltaPolicy>, 2> knob_values(DeltaPolicy) {
  return {{{"clamp", DeltaPolicy::Clamp}, {"skip", DeltaPolicy::SkipAddEps}}};
}

struct PenaltyOptions {
  double lambda0 = 0.1;      // A_0 = I / lambda0 (paper: 0.1, so A_0 = 10 I)
  double eps = 1e-4;         // delta guard threshold
  DeltaPolicy policy = DeltaPolicy::Clamp;
  int refresh_period = 20;   // add refresh_eta * I after steps t with t mod period == 0; 0 = never
  double refresh_eta = 1e-3;
  int rank = 1;              // columns of U per step

  void validate() const;     // throws std::invalid_argument naming the field ("lambda0: ...")
};

// The knobs of PenaltyOptions (core/knob.hpp), in the order a --help lists them.
template <class Options, class Visitor>
  requires std::is_same_v<std::remove_const_t<Options>, PenaltyOptions>
void for_each_knob(Options& o, Visitor&& v) {
  using Real = bool (*)(double);
  constexpr Real positive = [](double x) { return x > 0.0 && std::isfinite(x); };
  constexpr Real non_negative = [](double x) { return x >= 0.0 && std::isfinite(x); };
  v(knob("lambda0", "VLA: A_0 = I / lambda0 (Alg. 1 line 4)", o.lambda0, "a finite number > 0", positive));
  v(knob("eps", "the delta guard (Alg. 1 line 13) and every denominator's floor (all mixers)", o.eps,
         "a finite number > 0", positive));
  v(knob("refresh_period", "VLA: A += eta I after the steps t = 0 mod K (Alg. 1 line 16; 0 = off)", o.refresh_period,
         ">= 0 (0 = off)", [](int k) { return k >= 0; }));
  v(knob("refresh_eta", "VLA: the refresh's magnitude eta", o.refresh_eta, "a finite number >= 0", non_negative));
  v(knob("delta_policy", "VLA, when delta < eps: clamp = raise it to eps (Alg. 1 line 13), skip = skip the update and add eps I (spec 001)",
         o.policy));
  v(knob("rank", "VLA: penalty directions per step (Woodbury for > 1)", o.rank, ">= 1", [](int r) { return r >= 1; }));
}

inline void PenaltyOptions::validate() const {
  for_each_knob(*this, [](const auto& k) { k.check(); });
}

template <class P> class InversePenaltyTracker {
 public:
  using storage_t = typename P::storage_t;
  using compute_t = typename P::compute_t;

  InversePenaltyTracker() = default;
  InversePenaltyTracker(int batch, int d, PenaltyOptions opt) : opt_(opt), d_(d) {
    opt_.validate();
    reset(batch);
  }

  // A_0 = lambda0^{-1} I for every sequence (Alg. 1 line 4); t = 0.
  void reset(int batch) {
    const compute_t a0 = compute_t(1) / scalar_cast<compute_t>(opt_.lambda0);
    A_.assign(batch, cast_matrix<storage_t>(Mat<compute_t>(Mat<compute_t>::Identity(d_, d_) * a0)));
    t_ = 0;
  }

  struct UpdateResult {
    double delta;      // the denominator before the guard (rank r: smallest LDLT pivot)
    bool guard_fired;  // the guard changed the update
  };

  // One step for sequence b with penalty directions U (d x rank), then the periodic refresh.
  // Callers advance the step counter once per token with advance() after all b are updated.
  UpdateResult update(int b, const Mat<compute_t>& U) {
    Mat<compute_t> A = cast_matrix<compute_t>(A_[b]);
    const UpdateResult r = U.cols() == 1 ? sherman_morrison(A, U.col(0)) : woodbury(A, U);
    if (opt_.refresh_period > 0 && (t_ + 1) % opt_.refresh_period == 0)
      A.diagonal().array() += scalar_cast<compute_t>(opt_.refresh_eta);
    A_[b] = cast_matrix<storage_t>(A);
    return r;
  }
  void advance() { ++t_; }

  // A_t x for sequence b, in compute_t.
  Vec<compute_t> apply(int b, const Vec<compute_t>& x) const { return cast_matrix<compute_t>(A_[b]) * x; }

  const Mat<storage_t>& A(int b) const { return A_[b]; }
  Mat<storage_t>& A(int b) { return A_[b]; }
  int batch() const { return static_cast<int>(A_.size()); }
  int step() const { return t_; }
  const PenaltyOptions& options() const { return opt_; }
  double frobenius_norm(int b) const { return frobenius(A_[b]); }

 private:
  // Alg. 1 lines 12-14.
  UpdateResult sherman_morrison(Mat<compute_t>& A, const Vec<compute_t>& u) const {
    const compute_t eps = scalar_cast<compute_t>(opt_.eps);
    const Vec<compute_t> z = A * u;
    const compute_t delta = compute_t(1) + u.dot(z);
    if (opt_.policy == DeltaPolicy::Clamp) {
      const bool fired = !(delta >= eps);
      A = A - (z * z.transpose()) / (fired ? eps : delta);
      return {to_double(delta), fired};
    }
    using std::abs;
    if (abs(delta) < eps) {  // spec 001: skip the update, add eps I
      A.diagonal().array() += eps;
      return {to_double(delta), true};
    }
    A = A - (z * z.transpose()) / delta;
    return {to_double(delta), false};
  }

  // Woodbury for U with r columns; C = I + U^T A U factored as L D L^T (no pivoting: C is SPD in
  // exact arithmetic). The guard acts on the pivots D: Clamp raises each below eps to eps; Skip
  // skips the whole rank-r update and adds eps I when any pivot is below eps in magnitude.
  UpdateResult woodbury(Mat<compute_t>& A, const Mat<compute_t>& U) const {
    const compute_t eps = scalar_cast<compute_t>(opt_.eps);
    const int r = static_cast<int>(U.cols());
    const Mat<compute_t> Z = A * U;
    Mat<compute_t> C = Mat<compute_t>::Identity(r, r) + U.transpose() * Z;
    // Unpivoted LDL^T written out: r is small (<= d) and Eigen's LDLT pivots, which would make the
    // pivots' meaning order-dependent.
    Mat<compute_t> L = Mat<compute_t>::Identity(r, r);
    Vec<compute_t> D(r);
    for (int j = 0; j < r; ++j) {
      compute_t s = C(j, j);
      for (int k = 0; k < j; ++k) s -= L(j, k) * L(j, k) * D(k);
      D(j) = s;
      for (int i = j + 1; i < r; ++i) {
        compute_t x = C(i, j);
        for (int k = 0; k < j; ++k) x -= L(i, k) * L(j, k) * D(k);
        L(i, j) = x / D(j);
      }
    }
    compute_t min_pivot = D(0);
    for (int j = 1; j < r; ++j) if (D(j) < min_pivot) min_pivot = D(j);
    bool fired = false;
    if (opt_.policy == DeltaPolicy::Clamp) {
      for (int j = 0; j < r; ++j) if (!(D(j) >= eps)) { D(j) = eps; fired = true; }
    } else {
      using std::abs;
      for (int j = 0; j < r; ++j) fired = fired || abs(D(j)) < eps;
      if (fired) {
        A.diagonal().array() += eps;
        return {to_double(min_pivot), true};
      }
    }
    // A <- A - Z C^{-1} Z^T with C^{-1} = L^{-T} D^{-1} L^{-1}: W = L^{-1} Z^T, A -= W^T D^{-1} W.
    const Mat<compute_t> W = L.template triangularView<Eigen::UnitLower>().solve(Mat<compute_t>(Z.transpose()));
    A = A - W.transpose() * D.cwiseInverse().asDiagonal() * W;
    return {to_double(min_pivot), fired};
  }

  PenaltyOptions opt_;
  int d_ = 0;
  int t_ = 0;                       // tokens processed since reset
  std::vector<Mat<storage_t>> A_;   // (B, d, d)
};

}  // namespace vla
