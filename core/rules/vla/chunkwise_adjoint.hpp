#pragma once
// The backward of one VLA head in the chunk form: the adjoint of (V1)-(V5) (chunked.hpp; derived in
// docs/chunkwise-vla.md, "The backward in the chunk form", (A1)-(A7)) chunk by chunk from the last, each
// chunk's reverse pass a handful of matrix products, two triangular solves and the adjoint of its L D L^T,
// with no per-token state: a chunk reads only the state it starts from (VlaChunkStart, which the chunk
// forward leaves) and carries (dS, dz, dA) = dL/d(S, z, A) at its end to its start. In exact arithmetic it
// gives the sequential reverse pass's gradients (core/model/head.hpp head_backward with
// Adjoint<VlaRule<P>>, core/rules/vla/adjoint.hpp); tests/core/vla_chunkwise_adjoint.cpp holds it to them in
// mp50. It is the CPU reference of the matrix form a tensor-core backward would run: its products are the
// forward's shapes (C x d x d, C x C x d, d x d x C).
//
// Covered: the "vla" preset's gain (alpha_hat = unit(A_t k_hat)), rank 1, u from W_u, A updated, with or
// without key normalisation, any refresh period, eps <= 1 (delta_t = 1 + u^T A_{t-1} u >= 1 while A is
// SPD, so the guard never fires and the pivots are the unclamped delta_t). Anything else is refused,
// naming the option.
#include "core/feature_map.hpp"
#include "core/phi.hpp"
#include "core/rules/memory_rule.hpp"
#include "core/rules/vla/chunked.hpp"
#include "core/rules/vla/forward.hpp"

#include <Eigen/Cholesky>
#include <fmt/format.h>

#include <cmath>
#include <stdexcept>
#include <vector>

namespace vla {

template <class P>
HeadGrads<typename P::compute_t> chunkwise_head_backward(const VlaRule<P>& rule, const HeadSequence<typename P::compute_t>& x,
                                                          const Mat<typename P::compute_t>& dO, int chunk) {
  using T = typename P::compute_t;
  const VlaOptions& opt = rule.options();
  if (chunk < 1) throw std::invalid_argument(fmt::format("chunk: the chunk size must be >= 1, got {}", chunk));
  if (opt.gain != VlaGain::UnitPost) throw std::invalid_argument("gain: the chunkwise backward covers alpha_hat = unit(A_t k_hat) only");
  if (opt.fixed_A) throw std::invalid_argument("fixed_A: the chunkwise backward differentiates the updated A only");
  if (opt.penalty_source != PenaltySource::Projection)
    throw std::invalid_argument("penalty_source: the chunkwise backward differentiates u = unit(W_u k_raw) / sqrt(d_h) only");
  if (!(opt.penalty.eps <= 1.0))
    throw std::invalid_argument(fmt::format("eps: the chunkwise backward needs eps <= 1 (where the delta guard cannot fire), got {}",
                                            opt.penalty.eps));
  const Eigen::Index len = x.q.rows(), d = x.q.cols();
  if (dO.rows() != len || dO.cols() != x.v.cols()) throw std::invalid_argument("dO: expected (T, d_v), as the outputs");

  const VlaFeatures<T> f = vla_features<T>(x.q, x.k, x.u, opt);
  std::vector<VlaChunkStart<T>> starts;
  vla_chunked<T>(f, x.v, opt, chunk, {}, &starts);  // rank, renormalisation: refused there, naming them

  const T eps = scalar_cast<T>(opt.penalty.eps), eta = scalar_cast<T>(opt.penalty.refresh_eta);
  const int period = opt.penalty.refresh_period;
  const T scale = std::isnan(opt.penalty_scale) ? T(T(1) / T(std::sqrt(double(d)))) : scalar_cast<T>(opt.penalty_scale);
  const Eigen::Index dv = x.v.cols();
  HeadGrads<T> g(static_cast<int>(len), static_cast<int>(d));
  Mat<T> dQf = Mat<T>::Zero(len, d), dKf = Mat<T>::Zero(len, d);
  Mat<T> dS = Mat<T>::Zero(dv, d), dA = Mat<T>::Zero(d, d);  // dL/dS, dL/dA after the chunk
  Vec<T> dz = Vec<T>::Zero(d);                                // dL/dz after the chunk

  for (auto it = starts.rbegin(); it != starts.rend(); ++it) {
    const Eigen::Index c0 = it->c0, n = it->n;
    const Mat<T>& Ac = it->A;
    const Mat<T>& Sc = it->S;
    const Mat<T> Qf = f.Qf.middleRows(c0, n), Kf = f.Kf.middleRows(c0, n), K = f.Khat.middleRows(c0, n), U = f.U.middleRows(c0, n);
    const Mat<T> V = x.v.middleRows(c0, n);
    const T shift = period > 0 && (c0 + n) % period == 0 ? eta : T(0);

    // The chunk's forward again, from its start (V1)-(V5). L D L^T from the Cholesky factor C = L D^1/2
    // (unpivoted, as (V1) needs: the pivots are the delta_t).
    const Mat<T> W = U * Ac;
    const Mat<T> G = Mat<T>::Identity(n, n) + U * W.transpose();
    const Mat<T> C = Eigen::LLT<Mat<T>>(G).matrixL();
    const Vec<T> Dinv = C.diagonal().cwiseAbs2().cwiseInverse();
    const Mat<T> L = C * Vec<T>(C.diagonal().cwiseInverse()).asDiagonal();
    const auto Lt = L.template triangularView<Eigen::UnitLower>();
    const Mat<T> Y = Lt.solve(W);                                      // (V2) rows y_t = A_{t-1} u_t
    const Mat<T> N = K * Y.transpose();
    const Mat<T> Pm = Mat<T>(N.template triangularView<Eigen::Lower>()) * Dinv.asDiagonal();  // tril(K Y^T) D^-1
    Mat<T> Araw = K * Ac - Pm * Y;                                      // (V3) before line 20
    Araw.row(n - 1) += shift * K.row(n - 1);
    Mat<T> Ah(n, d);
    for (Eigen::Index t = 0; t < n; ++t) Ah.row(t) = unit(Vec<T>(Araw.row(t).transpose())).transpose();
    const Mat<T> LS = Mat<T>((K * Ah.transpose()).template triangularView<Eigen::StrictlyLower>());
    const Mat<T> IL = Mat<T>::Identity(n, n) + LS;
    const Mat<T> E = IL.template triangularView<Eigen::UnitLower>().solve(Mat<T>(V - K * Sc.transpose()));  // (V5)
    const Mat<T> M = Mat<T>((Qf * Ah.transpose()).template triangularView<Eigen::Lower>());
    const Mat<T> Onum = Qf * Sc.transpose() + M * E;
    Mat<T> Zt(n, d);  // z_t (line 24)
    Vec<T> zrun = it->z;
    for (Eigen::Index t = 0; t < n; ++t) {
      zrun += Kf.row(t).transpose();
      Zt.row(t) = zrun.transpose();
    }

    // (A1) the read o_t = Onum_t / den_t, den_t = max(phi(q_t) . z_t, eps): the floor has no gradient.
    Mat<T> dOn(n, dv);
    Vec<T> dzt_sum = dz;  // z' = z_c + sum of phi(k): dz reaches z_c and every phi(k_t) of the chunk
    Mat<T> dZt = Mat<T>::Zero(n, d);
    for (Eigen::Index t = 0; t < n; ++t) {
      const T qz = Qf.row(t).dot(Zt.row(t));
      const bool floored = qz < eps;
      const T den = floored ? eps : qz;
      dOn.row(t) = dO.row(c0 + t) / den;
      if (!floored) {
        const T dden = -dO.row(c0 + t).dot(Onum.row(t)) / (den * den);
        dQf.row(c0 + t) += dden * Zt.row(t);
        dZt.row(t) = dden * Qf.row(t);
      }
    }
    for (Eigen::Index t = n - 1; t >= 0; --t) {  // z_t sums phi(k_j), j <= t: phi(k_t) reads every later z
      dzt_sum += dZt.row(t).transpose();
      dKf.row(c0 + t) += dzt_sum.transpose();
    }
    // (A2) Onum = Q S_c^T + tril(Q Alpha^T) E and S' = S_c + E^T Alpha.
    Mat<T> dSc = dS + dOn.transpose() * Qf;
    dQf.middleRows(c0, n) += dOn * Sc;
    const Mat<T> dM = Mat<T>((dOn * E.transpose()).template triangularView<Eigen::Lower>());
    Mat<T> dE = M.transpose() * dOn + Ah * dS.transpose();
    dQf.middleRows(c0, n) += dM * Ah;
    Mat<T> dAh = dM.transpose() * Qf + E * dS;
    // (A3) (I + L_S) E = V - K S_c^T with L_S = strict tril(K Alpha^T).
    const Mat<T> F = IL.transpose().template triangularView<Eigen::UnitUpper>().solve(dE);
    const Mat<T> dLS = -Mat<T>((F * E.transpose()).template triangularView<Eigen::StrictlyLower>());
    Mat<T> dK = dLS * Ah - F * Sc;
    dAh += dLS.transpose() * K;
    dSc -= F.transpose() * K;
    g.dv.middleRows(c0, n) = F;
    // (A4) alpha_hat_t = unit(alpha_t) (line 20), Alpha = K A_c - tril(K Y^T) D^-1 Y (+ shift k_hat on the last row).
    Mat<T> dAr(n, d);
    for (Eigen::Index t = 0; t < n; ++t) dAr.row(t) = unit_backward<T>(Vec<T>(Araw.row(t).transpose()), Vec<T>(dAh.row(t).transpose())).transpose();
    dK += dAr * Ac.transpose();
    dK.row(n - 1) += shift * dAr.row(n - 1);
    Mat<T> dAc = dA + K.transpose() * dAr;
    const Mat<T> dPm = -Mat<T>((dAr * Y.transpose()).template triangularView<Eigen::Lower>());
    Mat<T> dY = -Pm.transpose() * dAr;
    const Mat<T> dN = dPm * Dinv.asDiagonal();
    Vec<T> dDinv = dPm.cwiseProduct(N).colwise().sum().transpose();
    dK += dN * Y;
    dY += dN.transpose() * K;
    // (A5) A' = A_c - Y^T D^-1 Y (+ shift I): only the symmetric part of dA reaches Y.
    const Mat<T> dAsym = dA + dA.transpose();
    dY -= Dinv.asDiagonal() * Y * dAsym;
    for (Eigen::Index j = 0; j < n; ++j) dDinv(j) -= Y.row(j).dot(dA * Y.row(j).transpose());
    // (A6) Y = L^-1 W, then the adjoint of G = L D L^T: with Z = strict tril(L^T dL D^-1) + diag(dD),
    // dG = L^-T Z L^-1 (symmetrised: G is symmetric), and G = I + U A_c U^T, W = U A_c.
    const Mat<T> dW = Lt.transpose().solve(dY);
    const Mat<T> dL = -Mat<T>((dW * Y.transpose()).template triangularView<Eigen::StrictlyLower>());
    const Vec<T> dD = -dDinv.cwiseProduct(Dinv).cwiseProduct(Dinv);
    Mat<T> Z = Mat<T>((L.transpose() * dL * Dinv.asDiagonal()).template triangularView<Eigen::StrictlyLower>());
    Z.diagonal() = dD;
    const Mat<T> dG1 = Lt.transpose().solve(Z);                              // L^-T Z
    const Mat<T> dG = Lt.transpose().solve(Mat<T>(dG1.transpose())).transpose();  // (L^-T Z) L^-1
    const Mat<T> dGs = (dG + dG.transpose()) / T(2);
    const Mat<T> dU = T(2) * dGs * W + dW * Ac.transpose();
    dAc += U.transpose() * dGs * U + U.transpose() * dW;
    // (A7) the carries at the chunk's start, and the features' rows (lines 8-10).
    dS = dSc;
    dz = dzt_sum;
    dA = dAc;
    for (Eigen::Index t = 0; t < n; ++t) {
      const Vec<T> ur = x.u.row(c0 + t).transpose(), kf = Kf.row(t).transpose(), dk = dK.row(t).transpose();
      g.du.row(c0 + t) = (unit_backward<T>(ur, Vec<T>(dU.row(t).transpose())) * scale).transpose();  // line 10
      dKf.row(c0 + t) += (opt.normalise_key ? unit_backward<T>(kf, dk) : dk).transpose();
    }
  }
  for (Eigen::Index t = 0; t < len; ++t)
    for (Eigen::Index i = 0; i < d; ++i) {
      g.dq(t, i) = dQf(t, i) * elu_plus_one_grad(x.q(t, i));
      g.dk(t, i) = dKf(t, i) * elu_plus_one_grad(x.k(t, i));
    }
  return g;
}

}  // namespace vla
