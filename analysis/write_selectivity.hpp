#pragma once
// Does a VLA head write each association in a direction orthogonal to the keys written before it? The
// paper credits A_t with that per-direction selectivity (Sec. 3, lines 36 and 151 of seeds/000; Sec. 7.1-7.2,
// lines 340-348): A_t contracts along the penalty directions it has seen, so alpha_hat_t = unit(A_t k_hat_t)
// loses the components of k_hat_t along stored keys ("A_1 k_hat_2 ∝ k_hat_2 - rho k_hat_1"), and the
// association stored under k_hat_1 is not diluted. With A_t ∝ I on the keys' span (no selectivity) the write
// is the key itself, alpha_hat_t = k_hat_t, as in linear attention with normalised keys. This is the
// trained-stream form of analysis/write_direction.hpp's two-key measure (the sec72 claim).
#include "analysis/head_stream.hpp"
#include "core/rules/vla/forward.hpp"

namespace vla::analysis {

struct WriteSelectivity {
  // sum_t sum_{s<t} |k_hat_s . alpha_hat_t| / sum_t sum_{s<t} |k_hat_s . k_hat_t|: how much of the keys'
  // overlap with the keys before them survives in the write directions. 0: every write orthogonal to every
  // earlier key (Sec. 7.2's orthogonalisation); 1: alpha_hat_t = k_hat_t.
  double overlap_ratio = 0;
  double alignment = 0;           // mean_t cos(alpha_hat_t, k_hat_t)
  // (The write direction is alpha_hat_t made unit: the RLS gain's alpha is not.)
  double penalty_directions = 0;  // participation ratio of the u_t (analysis/direction_spread.hpp)
  double key_directions = 0;      // the same of the k_hat_t
};

// Algorithm 1 in double with `opt` over the stream (T >= 2). Throws std::invalid_argument for a rank other
// than 1, a stream of fewer than 2 tokens, or keys with no overlap at all (the ratio's denominator 0).
WriteSelectivity write_selectivity(const VlaOptions& opt, const HeadStream& s);
// The same run's overlap ratio and alignment alone (the participation ratios left at 0): for counterfactual
// penalty directions on a stream whose directions write_selectivity has already measured.
WriteSelectivity write_overlap(const VlaOptions& opt, const HeadStream& s);

}  // namespace vla::analysis
