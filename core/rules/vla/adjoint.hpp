#pragma once
// The adjoint of one VLA step (forward.hpp, Alg. 1 lines 8-22, every variant of rank 1), reverse
// order of the forward; the read and z (lines 24-26) are NormalisedAdjoint's. Carries dS = dL/dS_t
// and dA = dL/dA_t from step t to t - 1. The cheap quantities (k_hat, u, alpha, delta) are recomputed
// from the step's inputs by the forward's formulas; S_{t-1}, A_{t-1}, A_t come from the tape.
//   (22)      S_t = S_{t-1} + e alpha^T:  de = dS alpha, dalpha = dS^T e
//   (21)      e = v - S_{t-1} k_hat:      dv = de, dk_hat = -S_{t-1}^T de, dS_{t-1} = dS_t - de k_hat^T
//   (19, 20)  alpha = unit(A_t k_hat):    dA_t += da k_hat^T, dk_hat += A_t^T da, da = unit'(dalpha)
//             [RLS, Table 5: alpha = A_{t-1} k_hat / max(1 + k_hat^T A_{t-1} k_hat, eps)]
//   (12-17)   A_t = A_{t-1} - zv zv^T / max(delta, eps) [+ eta I], zv = A_{t-1} u, delta = 1 + u^T zv:
//             dzv = -(dA + dA^T) zv / dc, ddelta = zv^T dA zv / dc^2 (0 when clamped),
//             dA_{t-1} = dA_t + dzv u^T, du = ddelta zv + A_{t-1}^T dzv; the refresh adds a constant
//   (10)      u = unit(u_raw) / sqrt(d_h):  du_raw = unit'(du) / sqrt(d_h)
//   (9)       k_hat = unit(k_feat):         dk_feat += unit'(dk_hat)
#include "core/rules/vla/forward.hpp"

#include <cmath>

namespace vla {

template <class P> struct Adjoint<VlaRule<P>> : NormalisedAdjoint<typename P::compute_t> {
  using T = typename P::compute_t;
  using Tape = typename VlaRule<P>::State::Tape;

  Adjoint(const VlaRule<P>& rule, int d)
      : NormalisedAdjoint<T>(d, T(rule.options().penalty.eps)),
        vo(rule.options()),
        zero(Mat<T>::Zero(d, d)),
        // A_0 = I / lambda0, computed as InversePenaltyTracker::reset does.
        A0(Mat<T>::Identity(d, d) * T(T(1) / T(vo.penalty.lambda0))),
        scale(std::isnan(vo.penalty_scale) ? T(T(1) / T(std::sqrt(double(d)))) : T(vo.penalty_scale)),
        dA(Mat<T>::Zero(d, d)),
        sym(d, d) {
    if (vo.penalty.rank != 1)
      throw std::invalid_argument(fmt::format("--rank: the VLA backward supports rank 1 only, got {}", vo.penalty.rank));
    if (vo.penalty_source != PenaltySource::Projection)
      throw std::invalid_argument("penalty_source: the VLA backward differentiates u = unit(W_u k_raw) / sqrt(d_h) only");
  }

  // The carried adjoints between two steps: dL/dS_t, dL/dz_t, dL/dA_t after step t + 1's adjoint (zero
  // after the last token). The group-parallel backward (chunked_adjoint.hpp) reads them after walking a
  // group and sets them before walking one from chosen values; step() is the same either way.
  struct Carry {
    Mat<T> dS;  // (d_h, d_h)
    Vec<T> dz;  // (d_h)
    Mat<T> dA;  // (d_h, d_h); only its symmetric part reaches any gradient
  };
  Carry carry() const { return Carry{this->dS, this->dz, dA}; }
  void set_carry(const Carry& c) {
    if (c.dS.rows() != dA.rows() || c.dS.cols() != dA.cols() || c.dz.size() != dA.rows() || c.dA.rows() != dA.rows() ||
        c.dA.cols() != dA.cols())
      throw std::invalid_argument(fmt::format("carry: expected dS, dA ({0}, {0}) and dz ({0})", dA.rows()));
    this->dS = c.dS;
    this->dz = c.dz;
    dA = c.dA;
  }

  // Speed: the (d_h, d_h) carries dS, dA are updated IN PLACE (dS_t -> dS_{t-1}, dA_t -> dA_{t-1})
  // and sym is a preallocated workspace, so no (d_h, d_h) matrix is allocated or copied per step.
  // Every in-place update computes the same elementwise expression as the out-of-place form
  // (x - a_i b_j, x + a_i b_j), so the gradients are bit-identical to it.
  void step(int t, const HeadSequence<T>& x, const Tape& tp, const Mat<T>& dO, HeadGrads<T>& g) {
    using std::abs;
    auto& dS = this->dS;
    const T eps = this->eps_;
    NormalisedAdjoint<T>::step(t, x, tp, dO, g, [&](const Vec<T>& k_feat, Vec<T>& dk_feat) {
      const int d = static_cast<int>(k_feat.size());
      const Vec<T> v_t = x.v.row(t).transpose();
      Vec<T> dk_hat = Vec<T>::Zero(d);
      const Vec<T> k_hat = vo.normalise_key ? unit(k_feat) : k_feat;
      const Mat<T>& S_prev = t ? tp.S[t - 1] : zero;
      const Mat<T>& A_t = tp.A[t];
      const Mat<T>& A_prev = t ? tp.A[t - 1] : A0;
      // alpha (lines 19-20, or the RLS gain of Table 5)
      Vec<T> alpha, a, Ak;
      T dc = T(1), den_r = T(1);
      if (vo.gain == VlaGain::RlsPrior) {
        Ak = A_prev * k_hat;
        den_r = T(1) + k_hat.dot(Ak);
        dc = den_r < eps ? eps : den_r;
        alpha = Ak / dc;
      } else {
        a = A_t * k_hat;
        alpha = vo.gain == VlaGain::UnitPost ? unit(a) : a;
      }
      // S_t = S_{t-1} + e alpha^T, e = v - S_{t-1} k_hat (lines 21-22)
      const Vec<T> e = v_t - S_prev * k_hat;
      const Vec<T> de = dS * alpha;
      const Vec<T> dalpha = dS.transpose() * e;
      g.dv.row(t) = de.transpose();
      dk_hat -= S_prev.transpose() * de;
      dS.noalias() -= de * k_hat.transpose();  // dS_{t-1} = dS_t - de k_hat^T
      Vec<T> dAk;  // RLS only: dL/d(A_{t-1} k_hat), added into dA_{t-1} at the end of the step
      if (vo.gain == VlaGain::RlsPrior) {
        dAk = dalpha / dc;
        if (!(den_r < eps)) {
          const T dden = -dalpha.dot(alpha) / dc;
          dk_hat += dden * Ak;
          dAk += dden * k_hat;
        }
        dk_hat += A_prev.transpose() * dAk;
      } else {
        const Vec<T> da = vo.gain == VlaGain::UnitPost ? unit_backward<T>(a, dalpha) : dalpha;
        dA.noalias() += da * k_hat.transpose();
        dk_hat += A_t.transpose() * da;
      }
      // A_t = A_{t-1} - zv zv^T / max(delta, eps) [+ eta I] (lines 12-17); the refresh adds a constant.
      // dA now holds dL/dA_t in full; it becomes dL/dA_{t-1} in place below.
      if (!vo.fixed_A) {
        const Vec<T> ur = x.u.row(t).transpose();
        const Vec<T> uvec = unit(ur) * scale;  // line 10
        const Vec<T> zv = A_prev * uvec;
        const T delta = T(1) + uvec.dot(zv);
        bool skipped = false, clamped = false;
        if (vo.penalty.policy == DeltaPolicy::Clamp) clamped = !(delta >= eps);
        else skipped = abs(delta) < eps;
        Vec<T> du_vec = Vec<T>::Zero(d);
        if (!skipped) {
          const T dl = clamped ? eps : delta;
          sym.noalias() = dA + dA.transpose();
          Vec<T> dzv = -(sym * zv) / dl;
          if (!clamped) {
            const T ddelta = zv.dot(dA * zv) / (dl * dl);
            dzv += ddelta * uvec;
            du_vec += ddelta * zv;
          }
          dA.noalias() += dzv * uvec.transpose();  // dA_{t-1} = dA_t + dzv u^T (dA_t read above for the last time)
          du_vec += A_prev.transpose() * dzv;
        }
        g.du.row(t) = (unit_backward<T>(ur, du_vec) * scale).transpose();
      } else {
        g.du.row(t).setZero();
      }
      if (vo.gain == VlaGain::RlsPrior) dA.noalias() += dAk * k_hat.transpose();
      dk_feat += vo.normalise_key ? unit_backward<T>(k_feat, dk_hat) : dk_hat;
    });
  }

 private:
  const VlaOptions vo;
  const Mat<T> zero;  // S_0
  const Mat<T> A0;
  const T scale;      // line 10's 1/sqrt(d_h), or penalty_scale
  Mat<T> dA;          // dL/dA_t, carried backwards
  Mat<T> sym;         // workspace: dA + dA^T
};

}  // namespace vla
