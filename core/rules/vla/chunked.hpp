#pragma once
// The chunkwise-parallel form of Algorithm 1 (docs/chunkwise-vla.md derives every equation cited here).
//
// The paper (Sec. 3.4, Alg. 2) holds that the data-dependent Sherman-Morrison denominator prevents
// direct parallelism. Within a chunk of n tokens that starts from a materialised A_c it does not: with the
// chunk's penalty directions as rows of U (n, d) and W = U A_c (rows w_t = A_c u_t),
//   G = I + U A_c U^T = I + U W^T = L D L^T        (unit lower L, pivots D)             (V1)
// and the unpivoted factorisation's pivots are the recurrence's denominators, D_t = delta_t =
// 1 + u_t^T A_{t-1} u_t (Alg. 1 line 12), because the leading j x j block of G is the Woodbury
// system of the chunk's first j updates. With Y = L^{-1} W (rows y_t = A_{t-1} u_t, Alg. 1's z),
//   A_t = A_c - sum_{j<=t} y_j y_j^T / D_j                                               (V2)
// so every token's alpha_t = A_t k_hat_t (line 19) comes from two matrix products and a masked one,
//   Alpha = K A_c - tril(K Y^T D^{-1}) Y     (K: the chunk's k_hat as rows)              (V3)
// (strictly lower for the classical RLS gain, which reads A_{t-1}), the state the next chunk starts from is
//   A' = A_c - Y^T D^{-1} Y  (+ eta I when the refresh of line 16 falls on the chunk's last token)  (V4)
// and the memory's write S_t = S_{t-1} + (v_t - S_{t-1} k_hat_t) alpha_hat_t^T (lines 21-22) is the delta
// rule's chunked form with write direction alpha_hat_t and read key k_hat_t (delta_chunked.hpp, D1-D3)  (V5).
//
// Alg. 1's guard and refresh keep the form exact:
//   - Clamp (line 13): D_t is clamped as the factorisation produces it, before any later entry uses it;
//     the recurrence clamps delta_t before A_t is formed, and the factorisation's later entries read D_t
//     exactly as the recurrence's later steps read A_t, so both clamp the same number.
//   - Skip (spec 001: |delta_t| < eps skips the update and adds eps I): A changes by eps I within the
//     chunk, which (V2) cannot express; the chunk ends before that token, the token is its own chunk
//     with no update and A_c + eps I, and the next chunk starts after it.
//   - Refresh (line 16, after the steps with (t + 1) mod K == 0): chunks end on those tokens, so that the
//     refresh is a boundary's eta I; the token itself reads A_t after its refresh (+ eta k_hat_t in (V3)).
// Rank 1 only (the rank-r tracker clamps its Woodbury pivots after the whole factorisation, not as they
// are produced), and no renormalisation of S (a rescale inside a chunk is not a linear write).
#include "core/feature_map.hpp"
#include "core/rules/delta_chunked.hpp"
#include "core/rules/vla/forward.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <vector>

namespace vla {

// Alg. 1 lines 8-10 for a sequence, tokens as rows: the per-token maps every chunk reads.
template <class T> struct VlaFeatures {
  Mat<T> Qf;    // (T, d) phi(q_t), the read's query (line 25)
  Mat<T> Kf;    // (T, d) phi(k_t), what z adds (line 24)
  Mat<T> Khat;  // (T, d) k_hat_t (line 9; phi(k_t) itself without key normalisation)
  Mat<T> U;     // (T, d) u_t (line 10), scaled
};

// q, k (T, d) and u_raw (T, d) = W_u k_raw as rows (u_raw is ignored when the penalty comes from the key).
template <class T> VlaFeatures<T> vla_features(const Mat<T>& q, const Mat<T>& k, const Mat<T>& u_raw, const VlaOptions& opt) {
  const Eigen::Index len = q.rows(), d = q.cols();
  const T scale = std::isnan(opt.penalty_scale) ? T(T(1) / T(std::sqrt(double(d)))) : scalar_cast<T>(opt.penalty_scale);
  VlaFeatures<T> f{Mat<T>(len, d), Mat<T>(len, d), Mat<T>(len, d), Mat<T>(len, d)};
  for (Eigen::Index t = 0; t < len; ++t) {
    const Vec<T> kf = elu_plus_one(Vec<T>(k.row(t).transpose()));
    f.Qf.row(t) = elu_plus_one(Vec<T>(q.row(t).transpose())).transpose();
    f.Kf.row(t) = kf.transpose();
    f.Khat.row(t) = (opt.normalise_key ? unit(kf) : kf).transpose();
    const Vec<T> dir = opt.penalty_source == PenaltySource::Key ? unit(kf) : unit(Vec<T>(u_raw.row(t).transpose()));
    f.U.row(t) = (dir * scale).transpose();
  }
  return f;
}

template <class T> struct VlaChunked {
  Mat<T> O;      // (T, d_v) the outputs o_t as rows (line 26)
  Mat<T> alpha;  // (T, d) the write directions (alpha_hat_t for Alg. 1, line 20)
  Vec<T> delta;  // (T) delta_t before the guard (the pivots of (V1)); NaN where A is fixed
  Mat<T> S;      // (d_v, d) the memory after the last token
  Vec<T> z;      // (d) the key sum after the last token
  Mat<T> A;      // (d, d) the penalty inverse after the last token
  int chunks = 0;       // chunks processed (refresh and skip split the nominal ones)
  int guard_fired = 0;  // tokens whose delta the guard changed
};

// Observes each chunk's penalty Gram G (V1) and the memory's unit lower-triangular system I + L (D1), for
// their condition numbers (analysis/vla_chunked_conditioning.hpp).
template <class T> using VlaChunkObserver = std::function<void(const Mat<T>& G, const Mat<T>& I_plus_L)>;

// The length of the chunk that starts at token c0: `chunk` tokens, fewer at `end`, ending on the next refresh
// step (line 16 follows the steps with (t + 1) mod period == 0; period 0: no refresh).
inline Eigen::Index vla_chunk_length(Eigen::Index c0, Eigen::Index end, int chunk, int period) {
  Eigen::Index n = std::min<Eigen::Index>(chunk, end - c0);
  if (period > 0) n = std::min<Eigen::Index>(n, period - c0 % period);
  return n;
}

// Where a chunk starts and the state it starts from: what the chunkwise backward (chunkwise_adjoint.hpp)
// reads instead of a per-token tape.
template <class T> struct VlaChunkStart {
  Eigen::Index c0 = 0, n = 0;  // the chunk's first token and its length
  Mat<T> A, S;                 // (d, d), (d_v, d): A_c and S_c
  Vec<T> z;                    // (d): z_c
};

// `ops`: how the chunk's matrix products read their operands (core/product_operands.hpp); Tf32 rounds the
// operands of the products the GPU forward runs on its tensor cores (W, G, K A_c, K Y^T, KYD Y, Y^T D^-1 Y
// and the memory's, delta_chunk_step) and leaves the factorisation, the sweeps and the norms in T.
template <class T>
VlaChunked<T> vla_chunked(const VlaFeatures<T>& f, const Mat<T>& V, const VlaOptions& opt, int chunk,
                          const VlaChunkObserver<T>& observe = {}, std::vector<VlaChunkStart<T>>* starts = nullptr,
                          ProductOperands ops = ProductOperands::Full) {
  opt.validate();
  const Eigen::Index len = f.Khat.rows(), d = f.Khat.cols(), dv = V.cols();
  if (chunk < 1) throw std::invalid_argument(fmt::format("chunk: the chunk size must be >= 1, got {}", chunk));
  if (opt.penalty.rank != 1)
    throw std::invalid_argument(fmt::format("rank: the chunked VLA covers rank 1 penalties, got {}", opt.penalty.rank));
  if (opt.memory.renormalise) throw std::invalid_argument("renormalise_S: the chunked VLA has no renormalisation of S");
  for (const Mat<T>* m : {&f.Qf, &f.Kf, &f.U})
    if (m->rows() != len || m->cols() != d) throw std::invalid_argument("vla_chunked: Qf, Kf, Khat, U (T, d) disagree in shape");
  if (V.rows() != len) throw std::invalid_argument("vla_chunked: V must have T rows");

  using Policy = DeltaPolicy;
  const T eps = scalar_cast<T>(opt.penalty.eps), eta = scalar_cast<T>(opt.penalty.refresh_eta);
  const int period = opt.fixed_A ? 0 : opt.penalty.refresh_period;  // fixed A: the tracker is never updated
  const bool post = opt.gain != VlaGain::RlsPrior;                   // reads A_t (line 19), not A_{t-1}
  const T nan = scalar_cast<T>(std::numeric_limits<double>::quiet_NaN());
  const auto op = [ops](const Mat<T>& M) { return product_operand<T>(M, ops); };  // a product's operand

  VlaChunked<T> r{Mat<T>(len, dv), Mat<T>(len, d), Vec<T>::Constant(len, nan), Mat<T>::Zero(dv, d), Vec<T>::Zero(d),
                  Mat<T>(Mat<T>::Identity(d, d) * T(T(1) / scalar_cast<T>(opt.penalty.lambda0))), 0, 0};  // line 4
  for (Eigen::Index c0 = 0; c0 < len;) {
    Eigen::Index n = vla_chunk_length(c0, len, chunk, period);
    const Mat<T> K = f.Khat.middleRows(c0, n);
    if (starts) starts->push_back(VlaChunkStart<T>{c0, 0, r.A, r.S, r.z});  // n once the guard has set it
    Mat<T> Y(0, d);    // (n, d) rows y_t = A_{t-1} u_t
    Vec<T> D(0);       // (n) the pivots after the guard
    Mat<T> G;          // (n, n), for the observer
    T shift = T(0);    // a multiple of I added to A at the chunk's last token (refresh, or the skip's eps)
    if (!opt.fixed_A) {
      const Mat<T> Uc = op(f.U.middleRows(c0, n));
      const Mat<T> W = Uc * op(r.A);                           // rows w_t = A_c u_t (A_c symmetric)
      G = Mat<T>::Identity(n, n) + Uc * op(W).transpose();  // (V1)
      // Unpivoted L D L^T, row by row, the guard applied to each pivot as it is produced.
      Mat<T> L = Mat<T>::Identity(n, n);
      D.resize(n);
      for (Eigen::Index j = 0; j < n; ++j) {
        T s = G(j, j);
        for (Eigen::Index k = 0; k < j; ++k) s -= L(j, k) * L(j, k) * D(k);
        r.delta(c0 + j) = s;
        using std::abs;
        if (opt.penalty.policy == Policy::SkipAddEps && abs(s) < eps) {
          if (j > 0) { n = j; break; }  // the chunk ends before the skipped token
          n = 1;                        // the skipped token alone: no update, A_c + eps I
          shift = eps;
          ++r.guard_fired;
          break;
        }
        if (opt.penalty.policy == Policy::Clamp && !(s >= eps)) { s = eps; ++r.guard_fired; }  // line 13
        D(j) = s;
        for (Eigen::Index i = j + 1; i < n; ++i) {
          T x = G(i, j);
          for (Eigen::Index k = 0; k < j; ++k) x -= L(i, k) * L(j, k) * D(k);
          L(i, j) = x / D(j);
        }
      }
      if (shift == T(0)) {
        D.conservativeResize(n);
        Y = Mat<T>(L.topLeftCorner(n, n)).template triangularView<Eigen::UnitLower>().solve(Mat<T>(W.topRows(n)));
        G = Mat<T>(G.topLeftCorner(n, n));
      } else {
        D.resize(0);
        G = Mat<T>::Identity(1, 1);
      }
    }
    if (period > 0 && (c0 + n) % period == 0) shift += eta;  // line 16 after this chunk's last token
    const Mat<T> Kc = K.topRows(n);

    // (V3): alpha_t = A_t k_hat_t (or A_{t-1} k_hat_t for RLS), A_c symmetric so (A_c k)^T = k^T A_c.
    Mat<T> alpha = op(Kc) * op(r.A);
    if (D.size() > 0) {
      Mat<T> KY = (op(Kc) * op(Y).transpose()) * D.cwiseInverse().asDiagonal();
      if (post) KY.template triangularView<Eigen::StrictlyUpper>().setZero();
      else KY.template triangularView<Eigen::Upper>().setZero();
      alpha.noalias() -= op(KY) * op(Y);
    }
    if (post) alpha.row(n - 1) += shift * Kc.row(n - 1);  // the last token reads A after its own shift
    for (Eigen::Index i = 0; i < n; ++i) {
      Vec<T> a = alpha.row(i).transpose();
      if (opt.gain == VlaGain::UnitPost) a = unit(a);  // line 20
      if (opt.gain == VlaGain::RlsPrior) {
        const T den = T(1) + Kc.row(i).dot(alpha.row(i));
        a /= den < eps ? eps : den;
      }
      alpha.row(i) = a.transpose();
    }
    // (V4)
    if (D.size() > 0) {
      // The GPU scales Y's rows by D^-1 before its product reads them, and so does the TF32 emulation.
      const Mat<T> dA = ops == ProductOperands::Full ? Mat<T>(Y.transpose() * D.cwiseInverse().asDiagonal() * Y)
                                                     : Mat<T>(op(Y).transpose() * op(D.cwiseInverse().asDiagonal() * Y));
      r.A -= (dA + dA.transpose()) / T(2);  // symmetric in every format, as the recurrence's z z^T / delta
    }
    r.A.diagonal().array() += shift;

    // (V5): S_t = S_{t-1} + (v_t - S_{t-1} k_hat_t) alpha_hat_t^T, the delta rule's chunk with W = alpha.
    const Vec<T> ones = Vec<T>::Ones(n);
    if (observe) {
      Mat<T> IL = Kc * alpha.transpose();
      IL.template triangularView<Eigen::Upper>().setZero();
      IL.diagonal().setOnes();
      observe(G, IL);
    }
    r.O.middleRows(c0, n) = delta_chunk_step<T>(r.S, r.z, f.Qf.middleRows(c0, n), Kc, alpha, f.Kf.middleRows(c0, n),
                                                V.middleRows(c0, n), {ones, ones, ones}, true, eps, ops);
    r.alpha.middleRows(c0, n) = alpha;
    if (starts) starts->back().n = n;
    ++r.chunks;
    c0 += n;
  }
  return r;
}

}  // namespace vla
