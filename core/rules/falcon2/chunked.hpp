#pragma once
// The chunkwise-parallel form of FALCON-2 and FALCON-2A (seed 003 sec. 4.2 "Chunk-parallel
// implementation", Algorithm 2 and appendix D, with the ridge's decay of D's "lambda_t > 0" paragraph).
// Row j of S (value channel j; the paper's column s_j) follows its own decayed delta rule,
//   s_{t,j} = gamma_{t,j} s_{t-1,j} + eta_{t,j} (v_{t,j} - c s_{t-1,j} . x_t) x_t^T           (4.5), (4.7)
// which is delta_chunked.hpp's S_t = a_t S_{t-1} + b_t (v_t - c_t S_{t-1} k_t) k_t^T on a one-channel value
// stream with a = gamma_{.,j}, b = eta_{.,j}, c_t = c and key k = x = RMSNorm(k_raw): d_v unit
// lower-triangular systems (D1) that share the chunk's Gram X X^T, as the paper says of per-channel step
// sizes. Where every channel has the same gain (FALCON-2A; FALCON-2 with equal gate logits, appendix E's
// FALCON-2-Lite) the d_v systems are one, solved once for all channels. FALCON-2A (c = 0) has no
// system at all (L = 0): its chunked form is the additive one under a scalar decay.
// The decay enters through (D1)-(D2)'s products of a, not through the paper's rescaled state S / c_t:
// exact where a decay is tiny, and equal in exact arithmetic (tests/train/falcon_test.cpp checks the
// rescaled form against the rule, tests/core/chunked_forms.cpp this one, both in mp50).
#include "core/rules/delta_chunked.hpp"
#include "core/rules/nlms_memory.hpp"

#include <stdexcept>

namespace vla {

// Qraw, Kraw (T, d_k): the raw projections q_t, k_t as rows; V (T, d_v); beta (T, d_v) the gains
// beta_{t,j} in (0, 2); c = 1 FALCON-2, 0 FALCON-2A. chunk >= 1, T need not be a multiple of it.
// Returns the outputs o_t = S_t RMSNorm(q_t) as rows and the state after the last token.
template <class T>
DeltaChunked<T> falcon_chunked(const Mat<T>& Qraw, const Mat<T>& Kraw, const Mat<T>& V, const Mat<T>& beta, const T& c,
                               const NlmsOptions& opt, int chunk) {
  const Eigen::Index len = Qraw.rows(), dk = Qraw.cols(), dv = V.cols();
  if (Kraw.rows() != len || Kraw.cols() != dk || V.rows() != len || beta.rows() != len || beta.cols() != dv)
    throw std::invalid_argument("falcon_chunked: Q, K (T, d_k), V and beta (T, d_v) disagree in shape");
  // The features (sec. 4.1) and each token's coefficients (eqs. 3.4, 4.4, the clamp), as the step computes them.
  const T eps = scalar_cast<T>(opt.eps);
  Mat<T> Q(len, dk), X(len, dk), eta(len, dv), gamma(len, dv);
  for (Eigen::Index t = 0; t < len; ++t) {
    Q.row(t) = rms_norm(Vec<T>(Qraw.row(t).transpose()), eps).transpose();
    X.row(t) = rms_norm(Vec<T>(Kraw.row(t).transpose()), eps).transpose();
    const auto k = nlms_coefficients<T>(Vec<T>(X.row(t).transpose()), Vec<T>(beta.row(t).transpose()), opt);
    eta.row(t) = k.eta.transpose();
    gamma.row(t) = k.gamma.transpose();
  }
  const Vec<T> cs = Vec<T>::Constant(len, c);
  bool shared = true;  // every channel with the same coefficients: one system for all of them
  for (Eigen::Index j = 1; j < dv && shared; ++j) shared = eta.col(j) == eta.col(0) && gamma.col(j) == gamma.col(0);
  if (shared) return delta_chunked<T>(Q, X, X, V, DeltaCoefficients<T>{gamma.col(0), eta.col(0), cs}, chunk, false, T(0));
  DeltaChunked<T> r{Mat<T>(len, dv), Mat<T>(dv, dk), Vec<T>()};
  for (Eigen::Index j = 0; j < dv; ++j) {
    const auto rj = delta_chunked<T>(Q, X, X, Mat<T>(V.col(j)), DeltaCoefficients<T>{gamma.col(j), eta.col(j), cs}, chunk, false, T(0));
    r.O.col(j) = rj.O.col(0);
    r.S.row(j) = rj.S.row(0);
  }
  return r;
}

}  // namespace vla
