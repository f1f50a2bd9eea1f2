#pragma once
// The chunkwise-parallel form of GLA (forward.hpp; seed 004 sec. 5.4: the rank-1 gate keeps the chunk's
// cumulative gate an outer product). With per-channel decays alpha_t (d_k) and, for a chunk of n tokens
// starting after state S, D^c_ij = prod_{r=j+1..i} alpha_{r,c} (i >= j; D^c_ii = 1) and G_{i,c} =
// prod_{r=0..i} alpha_{r,c}, unrolling S_i = S diag(G_i) + sum_{j<=i} v_j (k_j . D_{i,j})^T gives
//   o_i = S (G_i . q_i) + sum_{j<=i} (sum_c q_{i,c} k_{j,c} D^c_ij) v_j,
//   i.e. O = (Q . G) S^T + A V,   A_ij = sum_c q_{i,c} k_{j,c} D^c_ij (j <= i)                     (G1)
//   S' = S diag(G_{n-1}) + sum_j v_j (k_j . D_{n-1,j})^T                                           (G2)
// (rows of Q, K, V, alpha are tokens). The decays are formed by products per channel (chunk_decay), not
// as K / G and Q . G (the GLA paper's form, which divides by cumulative gates that underflow over a long
// chunk): O(n^2 d_k) per chunk, which a reference can afford, exact where a decay is tiny.
#include "core/rules/additive_chunked.hpp"  // chunk_decay

#include <algorithm>
#include <stdexcept>
#include <string>

namespace vla {

template <class T> struct GlaChunked {
  Mat<T> O;  // (T, d_v) the outputs as rows
  Mat<T> S;  // (d_v, d_k) the state after the last token
};

// Q, K (T, d_k) raw; V (T, d_v); alpha (T, d_k) the decays in (0, 1); chunk >= 1.
template <class T>
GlaChunked<T> gla_chunked(const Mat<T>& Q, const Mat<T>& K, const Mat<T>& V, const Mat<T>& alpha, int chunk) {
  const Eigen::Index len = Q.rows(), dk = Q.cols(), dv = V.cols();
  if (chunk < 1) throw std::invalid_argument("chunk: the chunk size must be >= 1, got " + std::to_string(chunk));
  if (K.rows() != len || K.cols() != dk || V.rows() != len || alpha.rows() != len || alpha.cols() != dk)
    throw std::invalid_argument("gla_chunked: Q, K, alpha (T, d_k) and V (T, d_v) disagree in shape");
  GlaChunked<T> r{Mat<T>(len, dv), Mat<T>::Zero(dv, dk)};
  for (Eigen::Index c0 = 0; c0 < len; c0 += chunk) {
    const Eigen::Index n = std::min<Eigen::Index>(chunk, len - c0);
    const auto Qc = Q.middleRows(c0, n), Kc = K.middleRows(c0, n), Vc = V.middleRows(c0, n);
    Mat<T> A = Mat<T>::Zero(n, n), G(n, dk), Dlast(n, dk);  // Dlast(j, c) = D^c_{n-1, j}
    for (Eigen::Index c = 0; c < dk; ++c) {
      const auto dec = chunk_decay<T>(alpha.col(c).segment(c0, n));
      A += (Qc.col(c) * Kc.col(c).transpose()).cwiseProduct(dec.D);  // D is 0 above the diagonal
      G.col(c) = dec.G;
      Dlast.col(c) = dec.D.row(n - 1).transpose();
    }
    r.O.middleRows(c0, n) = Qc.cwiseProduct(G) * r.S.transpose() + A * Vc;  // (G1)
    r.S = r.S * G.row(n - 1).asDiagonal();                                  // (G2)
    r.S.noalias() += Vc.transpose() * Kc.cwiseProduct(Dlast);
  }
  return r;
}

}  // namespace vla
