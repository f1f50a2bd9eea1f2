#pragma once
// The chunkwise-parallel form (seed 004 sec. 4) of the rules whose write is additive under a scalar decay,
//   S_t = gamma_t S_{t-1} + v_t k_t^T:
//   linear attention (linear/, gamma_t = 1, keys and queries through phi, the eq. (11) normalised read),
//   RetNet (retnet/, gamma_t = gamma) and Mamba-2 (mamba2/, gamma_t = sigmoid(g_t)) (scalar_decay.hpp,
//   raw q and k, o_t = S_t q_t).
// For a chunk of n tokens starting after state S (and key sum z), with D_ij = prod_{r=j+1..i} gamma_r
// (i >= j, within the chunk; D_ii = 1) and G_i = prod_{r=0..i} gamma_r, unrolling the recurrence gives
//   S_i  = G_i S + sum_{j<=i} D_ij v_j k_j^T                                        (C1)
//   o_i  = G_i S q_i + sum_{j<=i} D_ij (k_j . q_i) v_j,  i.e.  O = diag(G) Q S^T + (Q K^T . D) V    (C2)
//   S'   = G_{n-1} S + V^T diag(D_{n-1,.}) K,   the state the next chunk starts from                (C3)
// and for the normalised read (gamma = 1): z_i = z + sum_{j<=i} k_j, den_i = max(q_i . z_i, eps)  (C4)
// (rows of Q, K, V are tokens). Within a chunk everything is a matrix product; only the n x n mask D and
// the boundary states are sequential. The products are the recurrence's sums in another order: in exact
// arithmetic (C2)-(C4) equal the recurrence for every chunk size, which tests/core/additive_chunked.cpp
// checks in mp50; in float and bfloat16 the rounding differs, and the same test measures both forms
// against mp50 (docs/recurrences.md, "Chunkwise forms").
// D is formed by products (D_ij = gamma_i D_{i-1,j}), not as exp(log G_i - log G_j): exact where a gamma is
// 0 or tiny, at O(n^2) per chunk, which a reference can afford.
#include "core/scalar.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace vla {

// A chunk's decays (C1): D_ij = prod_{r=j+1..i} gamma_r for i >= j (0 above the diagonal, D_ii = 1),
// G_i = prod_{r=0..i} gamma_r and G_prev_i = G_{i-1} (G_prev_0 = 1), from the chunk's gamma (n).
template <class T> struct ChunkDecay {
  Mat<T> D;
  Vec<T> G, G_prev;
};
template <class T, class Segment> ChunkDecay<T> chunk_decay(const Segment& gamma) {
  const Eigen::Index n = gamma.size();
  ChunkDecay<T> c{Mat<T>::Zero(n, n), Vec<T>(n), Vec<T>(n)};
  for (Eigen::Index i = 0; i < n; ++i) {
    const T g = gamma(i);
    for (Eigen::Index j = 0; j < i; ++j) c.D(i, j) = g * c.D(i - 1, j);
    c.D(i, i) = T(1);
    c.G_prev(i) = i ? c.G(i - 1) : T(1);
    c.G(i) = g * c.G_prev(i);
  }
  return c;
}

template <class T> struct AdditiveChunked {
  Mat<T> O;  // (T, d_v) the outputs o_t as rows
  Mat<T> S;  // (d_v, d_k) the state after the last token
  Vec<T> z;  // (d_k) the key sum after the last token (the normalised read only)
};

// Q, K: (T, d_k) queries and keys as the memory sees them (phi applied for linear attention); V: (T, d_v);
// gamma: (T) the decays (ones for linear attention); chunk: tokens per chunk (>= 1; T need not be a
// multiple); normalised: the eq. (11) read o = S_t q / max(q . z_t, eps) (requires gamma = 1), else o = S_t q.
template <class T>
AdditiveChunked<T> additive_chunked(const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V, const Vec<T>& gamma, int chunk,
                                    bool normalised, const T& eps) {
  const Eigen::Index len = Q.rows(), dk = Q.cols(), dv = V.cols();
  if (chunk < 1) throw std::invalid_argument("chunk: the chunk size must be >= 1, got " + std::to_string(chunk));
  if (K.rows() != len || V.rows() != len || K.cols() != dk || gamma.size() != len)
    throw std::invalid_argument("additive_chunked: Q, K (T, d_k), V (T, d_v) and gamma (T) disagree in shape");
  if (normalised && (gamma.array() != T(1)).any())
    throw std::invalid_argument("additive_chunked: the normalised read (C4) is the undecayed rule's (gamma = 1)");
  AdditiveChunked<T> r{Mat<T>(len, dv), Mat<T>::Zero(dv, dk), Vec<T>::Zero(dk)};
  for (Eigen::Index c0 = 0; c0 < len; c0 += chunk) {
    const Eigen::Index n = std::min<Eigen::Index>(chunk, len - c0);
    const auto Qc = Q.middleRows(c0, n), Kc = K.middleRows(c0, n), Vc = V.middleRows(c0, n);
    const auto [D, G, G_prev] = chunk_decay<T>(gamma.segment(c0, n));  // (C1)
    const Mat<T> A = (Qc * Kc.transpose()).cwiseProduct(D);                    // (Q K^T . D), (C2)
    Mat<T> O = G.asDiagonal() * (Qc * r.S.transpose());                         // diag(G) Q S^T
    O.noalias() += A * Vc;
    if (normalised) {
      // (C4) with D = 1 on and below the diagonal: q_i . z_i = q_i . z + sum_{j<=i} q_i . k_j.
      const Vec<T> qz = Qc * r.z + A.rowwise().sum();
      for (Eigen::Index i = 0; i < n; ++i) {
        const T den = qz(i) < eps ? eps : qz(i);  // max(., eps) keeping a NaN, as normalised_read
        if (is_finite(den)) O.row(i) /= den;
        else O.row(i).setConstant(scalar_cast<T>(std::numeric_limits<double>::quiet_NaN()));
      }
      r.z += Kc.colwise().sum().transpose();
    }
    r.O.middleRows(c0, n) = O;
    // (C3): S' = G_{n-1} S + sum_j D_{n-1,j} v_j k_j^T
    r.S = G(n - 1) * r.S + Vc.transpose() * D.row(n - 1).asDiagonal() * Kc;
  }
  return r;
}

}  // namespace vla
