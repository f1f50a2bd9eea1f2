#pragma once
// The chunkwise-parallel form (seed 004 sec. 4, the delta rule's "UT transform") of the rules whose write
// is a decayed delta rule,
//   S_t = a_t S_{t-1} + u_t w_t^T,   u_t = b_t (v_t - c_t S_{t-1} k_t),
// which covers DeltaNet as the paper writes it (eq. 4: a_t = beta_t = sigmoid(g_t), b = c = 1, w = k;
// deltanet/), the classic delta rule (a = c = 1, b_t = beta_t) and Gated DeltaNet (a_t = alpha_t,
// b_t = beta_t, c_t = alpha_t: S_t = S_{t-1} alpha_t (I - beta_t k_t k_t^T) + beta_t v_t k_t^T), all
// writing along their key (w = k), and VLA's write (Alg. 1 lines 21-22: a = b = c = 1, w_t = alpha_hat_t).
// For a chunk of n tokens starting after state S, with D_ij = prod_{r=j+1..i} a_r (i >= j; D_ii = 1) and
// G_i = prod_{r=0..i} a_r, unrolling S_i = G_i S + sum_{j<=i} D_ij u_j w_j^T turns the u_i into the
// solution of one unit lower-triangular system (rows of U, V, K, W are tokens):
//   u_i + b_i c_i sum_{j<i} D_{i-1,j} (k_i . w_j) u_j = b_i (v_i - c_i G_{i-1} S k_i)        (D1)
//   i.e. (I + L) U = diag(b) (V - diag(c G_prev) K S^T),  L_ij = b_i c_i D_{i-1,j} (k_i . w_j), j < i
// (G_prev_i = G_{i-1}, G_prev_0 = 1), solved by forward substitution (the UT transform's (I + L)^-1);
// then, as for the additive rules (additive_chunked.hpp, C2-C4), with the pseudo-values U in place of V:
//   O = diag(G) Q S^T + (Q W^T . D) U,   S' = G_{n-1} S + U^T diag(D_{n-1,.}) W                    (D2)
// and for the eq. (11) read, den_i = max(q_i . z_i, eps) with z_i = z + sum_{j<=i} kz_j, where kz are
// the keys the running sum adds (phi(k), while the write uses k_hat = unit(phi(k)))                  (D3).
// In exact arithmetic (D1)-(D3) equal the recurrence for every chunk size (tests/core/chunked_forms.cpp,
// mp50); the triangular solve is where the chunked form rounds differently (measured there in float and
// bfloat16 against mp50).
#include "core/product_operands.hpp"
#include "core/rules/additive_chunked.hpp"  // chunk_decay
#include "core/scalar.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace vla {

template <class T> struct DeltaChunked {
  Mat<T> O;  // (T, d_v) the outputs as rows
  Mat<T> S;  // (d_v, d_k) the state after the last token
  Vec<T> z;  // (d_k) the key sum after the last token (the normalised read only)
};

// The per-token coefficients of the write: a (decay of S), b (gain of the residual), c (decay of the
// state the residual reads), each (T).
template <class T> struct DeltaCoefficients {
  Vec<T> a, b, c;
};

// One chunk of n tokens (rows of every matrix are the chunk's tokens), from the state S (d_v, d_k) and key
// sum z (d_k) that the previous chunk left, which it advances; returns the chunk's outputs (n, d_v).
// W (n, d_k) is the direction each token writes along, K (n, d_k) the key its residual reads with (W = K
// but for VLA: core/rules/vla/chunked.hpp). a, b, c (n) are the chunk's coefficients; Kz as in
// delta_chunked below.
// A matrix product's operand as `ops` has the product read it (core/product_operands.hpp): M itself, or
// every entry rounded to TF32, which emulates one tensor-core pass in any scalar.
template <class T> Mat<T> product_operand(const Mat<T>& M, ProductOperands ops) {
  if (ops == ProductOperands::Full) return M;
  return M.unaryExpr([](const T& x) { return scalar_cast<T>(round_to_tf32(scalar_cast<double>(x))); });
}

// `ops`: how the chunk's matrix products read their operands (the sums stay in T); the read's running key
// sum (D3) is not a matrix product on the GPU either and is never rounded.
template <class T>
Mat<T> delta_chunk_step(Mat<T>& S, Vec<T>& z, const Mat<T>& Q, const Mat<T>& K, const Mat<T>& W, const Mat<T>& Kz, const Mat<T>& V,
                        const DeltaCoefficients<T>& w, bool normalised, const T& eps, ProductOperands ops = ProductOperands::Full) {
  const Eigen::Index n = Q.rows();
  const auto [D, G, Gprev] = chunk_decay<T>(w.a);  // the decays of a, as (C1)
  const auto op = [ops](const Mat<T>& M) { return product_operand<T>(M, ops); };
  // (D1): right-hand side, then forward substitution through the strictly lower L.
  const Mat<T> KW = op(K) * op(W).transpose();
  Mat<T> U = V - (w.c.cwiseProduct(Gprev)).asDiagonal() * (op(K) * op(S).transpose());
  for (Eigen::Index i = 0; i < n; ++i) {
    const T bi = w.b(i), ci = w.c(i);
    U.row(i) *= bi;
    for (Eigen::Index j = 0; j < i; ++j) U.row(i) -= (bi * ci * D(i - 1, j) * KW(i, j)) * U.row(j);
  }
  // (D2)
  const Mat<T> A = (op(Q) * op(W).transpose()).cwiseProduct(D);
  Mat<T> O = G.asDiagonal() * (op(Q) * op(S).transpose());
  O.noalias() += op(A) * op(U);
  if (normalised) {
    // (D3): the running sum is undecayed and adds Kz, not K.
    Mat<T> QKz = Q * Kz.transpose();
    QKz.template triangularView<Eigen::StrictlyUpper>().setZero();  // token i sums keys j <= i
    const Vec<T> qz = Q * z + QKz.rowwise().sum();
    for (Eigen::Index i = 0; i < n; ++i) {
      const T den = qz(i) < eps ? eps : qz(i);  // max(., eps) keeping a NaN, as normalised_read
      if (is_finite(den)) O.row(i) /= den;
      else O.row(i).setConstant(scalar_cast<T>(std::numeric_limits<double>::quiet_NaN()));
    }
    z += Kz.colwise().sum().transpose();
  }
  S = G(n - 1) * S + op(U).transpose() * D.row(n - 1).asDiagonal() * op(W);
  return O;
}

// Q (T, d_k) queries as the read uses them (phi(q) for the normalised read); K (T, d_k) the keys of the
// write (k_hat); Kz (T, d_k) the keys the normalised read's running sum adds (phi(k); ignored when
// !normalised); V (T, d_v). chunk >= 1, T need not be a multiple of it.
template <class T>
DeltaChunked<T> delta_chunked(const Mat<T>& Q, const Mat<T>& K, const Mat<T>& Kz, const Mat<T>& V, const DeltaCoefficients<T>& w,
                              int chunk, bool normalised, const T& eps) {
  const Eigen::Index len = Q.rows(), dk = Q.cols(), dv = V.cols();
  if (chunk < 1) throw std::invalid_argument("chunk: the chunk size must be >= 1, got " + std::to_string(chunk));
  if (K.rows() != len || V.rows() != len || K.cols() != dk || w.a.size() != len || w.b.size() != len || w.c.size() != len ||
      (normalised && (Kz.rows() != len || Kz.cols() != dk)))
    throw std::invalid_argument("delta_chunked: Q, K, Kz (T, d_k), V (T, d_v) and a, b, c (T) disagree in shape");
  DeltaChunked<T> r{Mat<T>(len, dv), Mat<T>::Zero(dv, dk), Vec<T>::Zero(dk)};
  for (Eigen::Index c0 = 0; c0 < len; c0 += chunk) {
    const Eigen::Index n = std::min<Eigen::Index>(chunk, len - c0);
    const Mat<T> Kc = K.middleRows(c0, n);
    const DeltaCoefficients<T> wc{w.a.segment(c0, n), w.b.segment(c0, n), w.c.segment(c0, n)};
    r.O.middleRows(c0, n) = delta_chunk_step<T>(r.S, r.z, Q.middleRows(c0, n), Kc, Kc, normalised ? Mat<T>(Kz.middleRows(c0, n)) : Kc,
                                                V.middleRows(c0, n), wc, normalised, eps);
  }
  return r;
}

}  // namespace vla
