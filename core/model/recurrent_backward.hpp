#pragma once
// Backward through time of one head of the recurrent mixers (VLA and its variants, DeltaNet, linear
// attention), written against the rules' forward formulas (core/rules/*.hpp, Alg. 1) step by step.
// Inputs are the head's projections, one row per token: q, k, v, u_raw (n, d_h), the gate logits
// g (n), the tape (head_tape.hpp) and dO (n, d_h) = dL/do_t. Outputs dq, dk, dv, du (n, d_h), dg (n).
#include "core/feature_map.hpp"
#include "core/model/head_tape.hpp"
#include "core/rules/vla.hpp"

#include <cmath>

namespace vla::model {

enum class WriteKind { Vla, Delta, Additive };

// The read of eq. (11) / Alg. 1 line 26 backward: o = S q_feat / den, den = max(q_feat . z, eps).
// Adds into dS (d_h, d_h) and dz (d_h); returns dL/dq_raw (d_h).
template <class T>
Vec<T> read_backward(const Mat<T>& S, const Vec<T>& q_raw, const Vec<T>& z, const T& eps, const Vec<T>& dout,
                     Mat<T>& dS, Vec<T>& dz) {
  const Vec<T> q_feat = elu_plus_one(q_raw);
  const T dot = q_feat.dot(z);
  const bool floored = dot < eps;  // the floor is constant in q and z: no gradient through den
  const T den = floored ? eps : dot;
  dS.noalias() += dout * q_feat.transpose() / den;
  Vec<T> dq_feat = S.transpose() * dout / den;
  if (!floored) {
    const T gden = -dout.dot(S * q_feat) / (den * den);
    dq_feat += gden * z;
    dz += gden * q_feat;
  }
  return dq_feat.binaryExpr(q_raw, [](const T& g, const T& x) { return T(g * elu_plus_one_grad(x)); });
}

// d unit(x) = (I - x_hat x_hat^T) / ||x||; unit() returns a zero vector unchanged (gradient: identity).
template <class T> Vec<T> unit_backward(const Vec<T>& x, const Vec<T>& dy) {
  const T n = x.norm();
  if (n == T(0)) return dy;
  const Vec<T> xh = x / n;
  return (dy - xh * xh.dot(dy)) / n;
}

template <class T>
void recurrent_head_backward(WriteKind kind, const VlaOptions& vo, bool gated, double eps_d, const Mat<T>& q,
                             const Mat<T>& k, const Mat<T>& v, const Mat<T>& u_raw, const Vec<T>& g,
                             const HeadTape<T>& tp, const Mat<T>& dO, Mat<T>& dq, Mat<T>& dk, Mat<T>& dv,
                             Mat<T>& du, Vec<T>& dg) {
  using std::sqrt;
  using std::abs;
  const int n = static_cast<int>(q.rows()), d = static_cast<int>(q.cols());
  const T eps = T(eps_d);
  const Mat<T> zero = Mat<T>::Zero(d, d);
  // A_0 = I / lambda0, computed as InversePenaltyTracker::reset does.
  const Mat<T> A0 = Mat<T>::Identity(d, d) * T(T(1) / T(vo.penalty.lambda0));
  const T scale = std::isnan(vo.penalty_scale) ? T(T(1) / T(sqrt(double(d)))) : T(vo.penalty_scale);
  // Speed: the (d_h, d_h) carries dS, dA are updated IN PLACE (dS_t -> dS_{t-1}, dA_t -> dA_{t-1})
  // and sym is a preallocated workspace, so no (d_h, d_h) matrix is allocated or copied per step.
  // Every in-place update computes the same elementwise expression as the out-of-place form
  // (x - a_i b_j, x + a_i b_j), so the gradients are bit-identical to it.
  Mat<T> dS = Mat<T>::Zero(d, d);  // dL/dS_t, carried backwards
  Mat<T> dA = Mat<T>::Zero(d, d);  // dL/dA_t, carried backwards (VLA)
  Mat<T> sym(d, d);                // workspace: dA + dA^T (VLA)
  Vec<T> dz = Vec<T>::Zero(d);     // dL/dz_t
  for (int t = n - 1; t >= 0; --t) {
    const Mat<T>& S_t = tp.S[t];
    const Mat<T>& S_prev = t ? tp.S[t - 1] : zero;
    const Vec<T> k_raw = k.row(t).transpose(), v_t = v.row(t).transpose();
    dq.row(t) = read_backward<T>(S_t, Vec<T>(q.row(t).transpose()), tp.z[t], eps, Vec<T>(dO.row(t).transpose()), dS, dz).transpose();
    const Vec<T> k_feat = elu_plus_one(k_raw);
    Vec<T> dk_feat = dz;  // z_t = z_{t-1} + k_feat (line 25)
    Vec<T> dk_hat = Vec<T>::Zero(d);
    const bool norm_key = kind == WriteKind::Delta || (kind == WriteKind::Vla && vo.normalise_key);
    const Vec<T> k_hat = norm_key ? unit(k_feat) : k_feat;
    // From here on dS_t is turned into dS_{t-1} in place, after its last read in this step.
    if (kind == WriteKind::Additive) {  // S_t = S_{t-1} + v k_feat^T (eq. 3): dS_{t-1} = dS_t
      dv.row(t) = (dS * k_feat).transpose();
      dk_feat += dS.transpose() * v_t;
    } else if (kind == WriteKind::Delta) {  // S_t = beta S_{t-1} + (v - S_{t-1} k_hat) k_hat^T (eq. 4)
      const T beta = gated ? sigmoid(g(t)) : T(1);
      const Vec<T> e = v_t - S_prev * k_hat;
      const Vec<T> de = dS * k_hat;
      dv.row(t) = de.transpose();
      dk_hat += dS.transpose() * e - S_prev.transpose() * de;
      dg(t) = gated ? T(dS.cwiseProduct(S_prev).sum() * beta * (T(1) - beta)) : T(0);
      dS *= beta;  // dS_{t-1} = beta dS_t - de k_hat^T
      dS.noalias() -= de * k_hat.transpose();
    } else {  // VLA, Alg. 1 lines 8-22
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
      dv.row(t) = de.transpose();
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
        const Vec<T> ur = u_raw.row(t).transpose();
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
        du.row(t) = (unit_backward<T>(ur, du_vec) * scale).transpose();
      } else {
        du.row(t).setZero();
      }
      if (vo.gain == VlaGain::RlsPrior) dA.noalias() += dAk * k_hat.transpose();
    }
    if (kind != WriteKind::Additive) dk_feat += norm_key ? unit_backward<T>(k_feat, dk_hat) : dk_hat;
    dk.row(t) = dk_feat.binaryExpr(k_raw, [](const T& gg, const T& x) { return T(gg * elu_plus_one_grad(x)); }).transpose();
  }
}

}  // namespace vla::model
