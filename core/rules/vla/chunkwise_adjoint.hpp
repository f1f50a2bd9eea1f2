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

// The carried adjoints at a chunk's end (in) or start (out): dL/dS (d_v, d), dL/dz (d), dL/dA (d, d; only its
// symmetric part reaches a gradient).
template <class T> struct VlaChunkCarry {
  Mat<T> dS;
  Vec<T> dz;
  Mat<T> dA;
};

// What one chunk's adjoint reads besides its carry: the options' constants and the features of the whole
// sequence (vla_features), the raw inputs (rows of x) for lines 8-10's adjoints, and dO.
template <class T> struct VlaChunkAdjointInputs {
  const VlaFeatures<T>& f;
  const HeadSequence<T>& x;
  const Mat<T>& dO;
  T eps, eta, scale;  // line 13's eps (also the read's floor), line 16's eta, line 10's 1/sqrt(d_h)
  int period;         // line 16's refresh period (0: off)
  bool normalise_key;
};

// The adjoint of one chunk [c0, c0 + n) that starts from the state (Ac, Sc, zc): from the carry at its end,
// returns the carry at its start and writes the chunk's rows of g (dq, dk, dv, du: the sequential pass's
// rows once the carry is the true one).
template <class T>
VlaChunkCarry<T> vla_chunk_adjoint(const VlaChunkAdjointInputs<T>& in, Eigen::Index c0, Eigen::Index n, const Mat<T>& Ac,
                                   const Mat<T>& Sc, const Vec<T>& zc, const VlaChunkCarry<T>& carry, HeadGrads<T>& g) {
  const VlaFeatures<T>& f = in.f;
  const Eigen::Index d = f.Khat.cols(), dv = Sc.rows();
  const Mat<T> Qf = f.Qf.middleRows(c0, n), Kf = f.Kf.middleRows(c0, n), K = f.Khat.middleRows(c0, n), U = f.U.middleRows(c0, n);
  const Mat<T> V = in.x.v.middleRows(c0, n);
  const T eps = in.eps, shift = in.period > 0 && (c0 + n) % in.period == 0 ? in.eta : T(0);
  const Mat<T>& dS = carry.dS;
  const Mat<T>& dA = carry.dA;

  // The chunk's forward again, from its start (V1)-(V5). L D L^T from the Cholesky factor C = L D^1/2
  // (unpivoted, as (V1) needs: the pivots are the delta_t).
  const Mat<T> W = U * Ac;
  const Mat<T> G = Mat<T>::Identity(n, n) + U * W.transpose();
  const Eigen::LLT<Mat<T>> llt(G);
  if (llt.info() != Eigen::Success)  // G = I + U A_c U^T is SPD while A_c is: a non-SPD A_c is said, not differentiated
    throw std::runtime_error(fmt::format("chunkwise backward: the penalty Gram of tokens {}..{} is not positive definite "
                                         "(A before token {} lost its positive definiteness)", c0, c0 + n - 1, c0));
  const Mat<T> C = llt.matrixL();
  const Vec<T> Dinv = C.diagonal().cwiseAbs2().cwiseInverse();
  const Mat<T> L = C * Vec<T>(C.diagonal().cwiseInverse()).asDiagonal();
  const auto Lt = L.template triangularView<Eigen::UnitLower>();
  const Mat<T> Y = Lt.solve(W);  // (V2) rows y_t = A_{t-1} u_t
  const Mat<T> N = K * Y.transpose();
  const Mat<T> Pm = Mat<T>(N.template triangularView<Eigen::Lower>()) * Dinv.asDiagonal();  // tril(K Y^T) D^-1
  Mat<T> Araw = K * Ac - Pm * Y;                                                             // (V3) before line 20
  Araw.row(n - 1) += shift * K.row(n - 1);
  Mat<T> Ah(n, d);
  for (Eigen::Index t = 0; t < n; ++t) Ah.row(t) = unit(Vec<T>(Araw.row(t).transpose())).transpose();
  const Mat<T> LS = Mat<T>((K * Ah.transpose()).template triangularView<Eigen::StrictlyLower>());
  const Mat<T> IL = Mat<T>::Identity(n, n) + LS;
  const Mat<T> E = IL.template triangularView<Eigen::UnitLower>().solve(Mat<T>(V - K * Sc.transpose()));  // (V5)
  const Mat<T> M = Mat<T>((Qf * Ah.transpose()).template triangularView<Eigen::Lower>());
  const Mat<T> Onum = Qf * Sc.transpose() + M * E;
  Mat<T> Zt(n, d);  // z_t (line 24)
  Vec<T> zrun = zc;
  for (Eigen::Index t = 0; t < n; ++t) {
    zrun += Kf.row(t).transpose();
    Zt.row(t) = zrun.transpose();
  }

  // (A1) the read o_t = Onum_t / den_t, den_t = max(phi(q_t) . z_t, eps): the floor has no gradient.
  Mat<T> dQf = Mat<T>::Zero(n, d), dKf(n, d), dOn(n, dv), dZt = Mat<T>::Zero(n, d);
  for (Eigen::Index t = 0; t < n; ++t) {
    const T qz = Qf.row(t).dot(Zt.row(t));
    const bool floored = qz < eps;
    const T den = floored ? eps : qz;
    dOn.row(t) = in.dO.row(c0 + t) / den;
    if (!floored) {
      const T dden = -in.dO.row(c0 + t).dot(Onum.row(t)) / (den * den);
      dQf.row(t) += dden * Zt.row(t);
      dZt.row(t) = dden * Qf.row(t);
    }
  }
  Vec<T> dz = carry.dz;  // z' = z_c + the chunk's phi(k): dz reaches z_c and every phi(k_t) of the chunk
  for (Eigen::Index t = n - 1; t >= 0; --t) {  // z_t sums phi(k_j), j <= t: phi(k_t) reads every later z
    dz += dZt.row(t).transpose();
    dKf.row(t) = dz.transpose();
  }
  // (A2) Onum = Q S_c^T + tril(Q Alpha^T) E and S' = S_c + E^T Alpha.
  Mat<T> dSc = dS + dOn.transpose() * Qf;
  dQf += dOn * Sc;
  const Mat<T> dM = Mat<T>((dOn * E.transpose()).template triangularView<Eigen::Lower>());
  const Mat<T> dE = M.transpose() * dOn + Ah * dS.transpose();
  dQf += dM * Ah;
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
  dY -= Dinv.asDiagonal() * Y * Mat<T>(dA + dA.transpose());
  for (Eigen::Index j = 0; j < n; ++j) dDinv(j) -= Y.row(j).dot(dA * Y.row(j).transpose());
  // (A6) Y = L^-1 W, then the adjoint of G = L D L^T: with Z = strict tril(L^T dL D^-1) + diag(dD),
  // dG = L^-T Z L^-1 (symmetrised: G is symmetric), and G = I + U A_c U^T, W = U A_c.
  const Mat<T> dW = Lt.transpose().solve(dY);
  const Mat<T> dL = -Mat<T>((dW * Y.transpose()).template triangularView<Eigen::StrictlyLower>());
  Mat<T> Z = Mat<T>((L.transpose() * dL * Dinv.asDiagonal()).template triangularView<Eigen::StrictlyLower>());
  Z.diagonal() = -dDinv.cwiseProduct(Dinv).cwiseProduct(Dinv);  // dD = -d(D^-1) D^-2
  const Mat<T> dG1 = Lt.transpose().solve(Z);                                    // L^-T Z
  const Mat<T> dG = Lt.transpose().solve(Mat<T>(dG1.transpose())).transpose();  // (L^-T Z) L^-1
  const Mat<T> dGs = (dG + dG.transpose()) / T(2);
  const Mat<T> dU = T(2) * dGs * W + dW * Ac.transpose();
  dAc += U.transpose() * dGs * U + U.transpose() * dW;
  // (A7) the chunk's rows (lines 8-10: unit' of k_hat and u, phi' of q and k).
  for (Eigen::Index t = 0; t < n; ++t) {
    const Vec<T> ur = in.x.u.row(c0 + t).transpose(), kf = Kf.row(t).transpose(), dk = dK.row(t).transpose();
    g.du.row(c0 + t) = (unit_backward<T>(ur, Vec<T>(dU.row(t).transpose())) * in.scale).transpose();  // line 10
    dKf.row(t) += (in.normalise_key ? unit_backward<T>(kf, dk) : dk).transpose();
    for (Eigen::Index i = 0; i < d; ++i) {
      g.dq(c0 + t, i) = dQf(t, i) * elu_plus_one_grad(in.x.q(c0 + t, i));
      g.dk(c0 + t, i) = dKf(t, i) * elu_plus_one_grad(in.x.k(c0 + t, i));
    }
  }
  return VlaChunkCarry<T>{dSc, dz, dAc};
}

// What the chunkwise backward covers (the header comment); throws naming the option otherwise.
inline void check_chunkwise_adjoint_options(const VlaOptions& opt, const char* who) {
  if (opt.gain != VlaGain::UnitPost) throw std::invalid_argument(fmt::format("gain: {} covers alpha_hat = unit(A_t k_hat) only", who));
  if (opt.fixed_A) throw std::invalid_argument(fmt::format("fixed_A: {} differentiates the updated A only", who));
  if (opt.penalty_source != PenaltySource::Projection)
    throw std::invalid_argument(fmt::format("penalty_source: {} differentiates u = unit(W_u k_raw) / sqrt(d_h) only", who));
  if (!(opt.penalty.eps <= 1.0))
    throw std::invalid_argument(fmt::format("eps: {} needs eps <= 1 (where the delta guard cannot fire), got {}", who, opt.penalty.eps));
}

template <class T> VlaChunkAdjointInputs<T> chunk_adjoint_inputs(const VlaFeatures<T>& f, const HeadSequence<T>& x, const Mat<T>& dO,
                                                                 const VlaOptions& opt) {
  const auto d = f.Khat.cols();
  return {f,
          x,
          dO,
          scalar_cast<T>(opt.penalty.eps),
          scalar_cast<T>(opt.penalty.refresh_eta),
          std::isnan(opt.penalty_scale) ? T(T(1) / T(std::sqrt(double(d)))) : scalar_cast<T>(opt.penalty_scale),
          opt.penalty.refresh_period,
          opt.normalise_key};
}

// dL/d of every input of x from dO = dL/do_t (T, d_v), chunk by chunk from the last (chunks of `chunk`
// tokens, cut at the refresh, as vla_chunked cuts them).
template <class P>
HeadGrads<typename P::compute_t> chunkwise_head_backward(const VlaRule<P>& rule, const HeadSequence<typename P::compute_t>& x,
                                                          const Mat<typename P::compute_t>& dO, int chunk) {
  using T = typename P::compute_t;
  const VlaOptions& opt = rule.options();
  if (chunk < 1) throw std::invalid_argument(fmt::format("chunk: the chunk size must be >= 1, got {}", chunk));
  check_chunkwise_adjoint_options(opt, "the chunkwise backward");
  const Eigen::Index len = x.q.rows(), d = x.q.cols();
  if (dO.rows() != len || dO.cols() != x.v.cols()) throw std::invalid_argument("dO: expected (T, d_v), as the outputs");
  const VlaFeatures<T> f = vla_features<T>(x.q, x.k, x.u, opt);
  std::vector<VlaChunkStart<T>> starts;
  vla_chunked<T>(f, x.v, opt, chunk, {}, &starts);  // rank, renormalisation: refused there, naming them
  const VlaChunkAdjointInputs<T> in = chunk_adjoint_inputs(f, x, dO, opt);
  HeadGrads<T> g(static_cast<int>(len), static_cast<int>(d));
  VlaChunkCarry<T> carry{Mat<T>::Zero(x.v.cols(), d), Vec<T>::Zero(d), Mat<T>::Zero(d, d)};  // after the last token
  for (auto it = starts.rbegin(); it != starts.rend(); ++it) carry = vla_chunk_adjoint(in, it->c0, it->n, it->A, it->S, it->z, carry, g);
  return g;
}

}  // namespace vla
