#pragma once
// The penalty inverse A at the start of every group of tokens, without stepping through the tokens: the
// A-loop of Algorithm 1 (lines 12-17) as a linear recurrence of 2d x d matrices (docs/chunkwise-vla.md,
// "The penalty chain", equations P1-P3).
//
// Between two refreshes the recurrence is Woodbury's update of the penalty M = A^{-1} by the segment's
// Gram: with U_s the segment's u_t as rows, Gram_s = U_s^T U_s and eta_s = eta when the refresh of line 16
// follows its last token (0 otherwise),
//   A' = (A^{-1} + Gram_s)^{-1} + eta_s I.                                                      (P1)
// That map is a matrix Moebius transformation, and those compose as 2d x 2d matrices: writing A = X Z^{-1},
//   [X'; Z'] = H_s [X; Z],   H_s = [[I + eta_s Gram_s, eta_s I], [Gram_s, I]]                   (P2)
// (check: X' Z'^{-1} = (A + eta_s (I + Gram_s A))(I + Gram_s A)^{-1} = A (I + Gram_s A)^{-1} + eta_s I).
// So a group of segments is one product Pi = H_m ... H_1, made from its own tokens alone (every group at
// once), and the only sequential part left is, per group,
//   A_next = (Pi_11 A + Pi_12)(Pi_21 A + Pi_22)^{-1}                                               (P3)
// one d x d solve, which also renormalises the homogeneous pair (so it never drifts over long sequences).
// The solve may also wait: a product of Moebius maps is the product of their matrices, so the pair can be
// carried across `span` groups by products, [X; Z] <- Pi_g [X; Z], and solved back to [A; I] once per span,
// each group start's A read from its pair by the same solve (what the GPU forward does: span = 128 segments
// over the group length); within a span that is one longer group's (P3).
//
// Exact when Alg. 1's guard never fires: A stays SPD, so delta_t = 1 + u_t^T A_{t-1} u_t >= 1 and the clamp
// (line 13) or the skip (spec 001) only act for eps > 1 or after a non-finite input. Measured in float against
// mp50 it rounds better than the token recurrence at groups of 16 segments (docs/chunkwise-vla.md).
#include "core/inverse_penalty_tracker.hpp"
#include "core/scalar.hpp"

#include <Eigen/LU>
#include <fmt/format.h>

#include <stdexcept>
#include <vector>

namespace vla {

// The token ranges a penalty chain walks: segments end on refresh steps ((t + 1) mod period == 0, line 16)
// and at the sequence's end; a group holds `group` segments (without a refresh: `group` tokens).
struct PenaltyChainShape {
  int T = 0;        // tokens
  int period = 0;   // refresh period (0: no refresh)
  int group = 16;   // segments per group (tokens per group without a refresh)
  int span = 1;     // groups per renormalisation of the pair [X; Z] (1: a solve after every group, (P3))

  int segment_tokens() const { return period > 0 ? period : 1; }
  int group_tokens() const { return group * segment_tokens(); }
  int groups() const { return (T + group_tokens() - 1) / group_tokens(); }
  void validate() const {
    if (T < 0) throw std::invalid_argument(fmt::format("T: the token count must be >= 0, got {}", T));
    if (period < 0) throw std::invalid_argument(fmt::format("refresh_period: must be >= 0, got {}", period));
    if (group < 1) throw std::invalid_argument(fmt::format("group: segments per group must be >= 1, got {}", group));
    if (span < 1) throw std::invalid_argument(fmt::format("span: groups per renormalisation must be >= 1, got {}", span));
  }
};

// Pi (2d, 2d) of the group that starts at token t0 (P2), from the rows of U (T, d), u_t as Alg. 1 line 10.
template <class T> Mat<T> penalty_group_map(const Mat<T>& U, const PenaltyChainShape& shape, int t0, const T& eta) {
  const Eigen::Index d = U.cols();
  const int end = std::min(shape.T, t0 + shape.group_tokens());
  Mat<T> Pi = Mat<T>::Identity(2 * d, 2 * d);
  // Without a refresh every H_s is [[I, 0], [Gram_s, I]]: one segment of the whole group does the same.
  const int step = shape.period > 0 ? shape.period : shape.group_tokens();
  for (int s0 = t0; s0 < end; s0 += step) {
    const int n = std::min(step, end - s0);
    const Mat<T> Us = U.middleRows(s0, n);
    const Mat<T> gram = Us.transpose() * Us;
    const T eta_s = shape.period > 0 && (s0 + n) % shape.period == 0 ? eta : T(0);
    // H_s Pi: bottom' = Gram_s top + bottom, top' = top + eta_s bottom'.
    const Mat<T> bottom = gram * Pi.topRows(d) + Pi.bottomRows(d);
    Pi.topRows(d) += eta_s * bottom;
    Pi.bottomRows(d) = bottom;
  }
  return Pi;
}

// A = X Z^{-1} from the homogeneous pair ((P3) with X = Pi_11 A + Pi_12, Z = Pi_21 A + Pi_22): Z^T A = X^T
// (A symmetric), solved by LU with partial pivoting, then symmetrised as the recurrence's updates are.
template <class T> Mat<T> penalty_from_pair(const Mat<T>& X, const Mat<T>& Z) {
  const Mat<T> A = Mat<T>(Z.transpose()).partialPivLu().solve(Mat<T>(X.transpose()));
  return (A + A.transpose()) / T(2);
}


// A at the start of every group (element g: before token g * shape.group_tokens()), from A_0 = I / lambda0.
// With shape.span > 1 the pair is solved only at groups 0, span, 2 span, ... and read at the others.
template <class T>
std::vector<Mat<T>> penalty_chain(const Mat<T>& U, const PenaltyChainShape& shape, const T& lambda0, const T& eta) {
  shape.validate();
  if (U.rows() != shape.T) throw std::invalid_argument(fmt::format("U: expected T = {} rows, got {}", shape.T, U.rows()));
  const Eigen::Index d = U.cols();
  std::vector<Mat<T>> starts;
  Mat<T> A = Mat<T>::Identity(d, d) * T(T(1) / lambda0);  // line 4; A at the last renormalisation
  Mat<T> X, Z;                                             // the pair since then, at groups past it
  for (int g = 0; g < shape.groups(); ++g) {
    const bool renormalised = g % shape.span == 0;
    starts.push_back(renormalised ? A : penalty_from_pair<T>(X, Z));
    const Mat<T> Pi = penalty_group_map<T>(U, shape, g * shape.group_tokens(), eta);
    if (renormalised) {  // [X; Z] <- Pi [A; I]
      X = Pi.topLeftCorner(d, d) * A + Pi.topRightCorner(d, d);
      Z = Pi.bottomLeftCorner(d, d) * A + Pi.bottomRightCorner(d, d);
    } else {             // [X; Z] <- Pi [X; Z]
      const Mat<T> Xn = Pi.topLeftCorner(d, d) * X + Pi.topRightCorner(d, d) * Z;
      Z = Pi.bottomLeftCorner(d, d) * X + Pi.bottomRightCorner(d, d) * Z;
      X = Xn;
    }
    if ((g + 1) % shape.span == 0) A = penalty_from_pair<T>(X, Z);  // the next group renormalises
  }
  return starts;
}

// What the chain is held to: InversePenaltyTracker's token-by-token A (one sequence, Alg. 1 lines 12-17)
// before every token t with t % every == 0, from the rows u_t of U (T, d) and the same options.
template <class T> std::vector<Mat<T>> tracker_penalties(const Mat<T>& U, const PenaltyOptions& opt, int every = 1) {
  if (every < 1) throw std::invalid_argument(fmt::format("every: must be >= 1, got {}", every));
  InversePenaltyTracker<Precision<T>> tracker(1, int(U.cols()), opt);
  std::vector<Mat<T>> before;
  for (int t = 0; t < U.rows(); ++t) {
    if (t % every == 0) before.push_back(tracker.A(0));
    tracker.update(0, Mat<T>(U.row(t).transpose()));
    tracker.advance();
  }
  return before;
}

}  // namespace vla
