#pragma once
// The memory of seed 003's non-sliding fast-weight rules, its step and its adjoint, written once for the
// two rules that differ only in their local objective (FALCON-2 regression, FALCON-2A inner product):
//
//   x_t = RMSNorm(k_t),  qf_t = RMSNorm(q_t),  RMSNorm(u) = u / (||u|| / sqrt(d) + eps)        (sec. 4.1)
//   lambda_t = ridge ||x_t||^2                                              (sec. 4.1, the scaled ridge)
//   eta_{j,t} = beta_{j,t} / (||x_t||^2 + lambda_t + eps),  eta := 0 if the denominator is 0   (eqs. 3.4, 4.8)
//   alpha_{j,t} = min(eta_{j,t} lambda_t, 1 - eps_gamma),  gamma_{j,t} = 1 - alpha_{j,t}       (the clamp, sec. 4.2)
//   S_t = diag(gamma_t) S_{t-1} + diag(eta_t) (v_t - c S_{t-1} x_t) x_t^T,   o_t = S_t qf_t      (read after write)
//     c = 1: FALCON-2, eq. (4.4) / (4.5), row j of S (a value channel) = the paper's column s_j
//     c = 0: FALCON-2A, eq. (4.7), the additive write (with one gain beta_t for every row)
//
// S is stored (d_v, d_k) as every rule here (the paper's S is (d_x, d_v): S_t^T x_t is our S_t x_t). The
// write is the shared delta write (delta_write.hpp) with per-row coefficients a = gamma_t, b = eta_t and
// read key = write key = x_t, so its adjoint is delta_write_adjoint_rows. The read is the paper's
// denominator-free o_t = S_t^T phi(q_t) with RMSNorm as the feature map (no running key sum, no z).
// One eps serves every denominator, as for the other mixers: RMSNorm's eps_rms and eq. (3.4)'s eps.
// The paper's next-latent alignment (x_t = RMSNorm(k_{t-1})) is not part of the step: these rules write
// the pair (x_t, v_t) they are given.
#include "core/memory_matrix_manager.hpp"
#include "core/rules/delta_write.hpp"
#include "core/rules/falcon_options.hpp"
#include "core/rules/memory_rule.hpp"
#include "core/rules/scalar_decay.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace vla {

// RMS(u) = ||u|| / sqrt(d), computed as unit() computes ||u|| (core/feature_map.hpp): the textbook norm in
// the format's normal range, else rescaled by max |u_i| first, so that it is accurate at every scale the
// format represents (RMS(u) <= max |u_i|: it cannot overflow where u does not).
template <class T> T rms(const Vec<T>& u) {
  using std::sqrt;
  static const T full_precision_squares = T(std::numeric_limits<T>::min()) / from_double<T>(unit_roundoff<T>());
  const T root_d = sqrt(T(static_cast<int>(u.size())));
  const T n = u.norm();
  if (is_finite(n) && n * n >= full_precision_squares) return n / root_d;
  const T m = u.cwiseAbs().maxCoeff();
  if (!(m > T(0)) || !is_finite(m)) return n / root_d;  // zero, or not finite: as is
  return m * T(Vec<T>(u / m).norm() / root_d);
}

// RMSNorm(u) = u / (RMS(u) + eps) (seed 003 sec. 4.1); u = 0 with eps = 0 stays 0.
template <class T> Vec<T> rms_norm(const Vec<T>& u, const T& eps) {
  const T s = rms(u) + eps;
  return s == T(0) ? u : Vec<T>(u / s);
}

// Its adjoint: with r = RMS(u), s = r + eps, du = dx / s - u (u . dx) / (s^2 d r) (the second term -> 0 as u -> 0).
template <class T> Vec<T> rms_norm_backward(const Vec<T>& u, const Vec<T>& dx, const T& eps) {
  const T r = rms(u), s = r + eps;
  if (s == T(0)) return dx;
  Vec<T> du = dx / s;
  if (r > T(0)) du -= u * T(u.dot(dx) / (s * s * T(static_cast<int>(u.size())) * r));
  return du;
}

// The hyper-parameters of the two rules: eq. (3.4)'s stabiliser eps (also RMSNorm's; >= 0, the paper's
// analysis takes 0) and FALCON's knobs (falcon_options.hpp).
struct NlmsOptions {
  double eps = 1e-4;
  FalconOptions falcon;
  void validate() const {
    if (!(eps >= 0.0) || !std::isfinite(eps)) throw std::invalid_argument(fmt::format("eps: must be a finite number >= 0, got {}", eps));
    falcon.validate();
  }
};

// The step's coefficients for write feature x (d_k) and gains beta (d_v), in the compute type.
template <class C> struct NlmsCoefficients {
  C n2, lambda, den;  // ||x||^2, lambda_t = ridge ||x||^2, ||x||^2 + lambda_t + eps
  Vec<C> eta;         // (d_v) eta_j = beta_j / den, 0 when den = 0
  Vec<C> gamma;       // (d_v) 1 - min(eta_j lambda, 1 - eps_gamma)
  std::vector<bool> clamped;  // (d_v) where the clamp acted (alpha_j = 1 - eps_gamma: no gradient to eta_j, lambda)
};

// From the write energy n2: ||x_t||^2 here; FALCON-3 passes its window's mean energy E_bar_t (seed 003
// sec. 4.4: eta_t = beta_t / (E_bar_t + lambda_t + eps), lambda_t = lambda_bar E_bar_t by sec. 4.1's last
// paragraph), the same coefficients with one energy in place of the other.
template <class C> NlmsCoefficients<C> nlms_coefficients_of_energy(const C& n2, const Vec<C>& beta, const NlmsOptions& opt) {
  NlmsCoefficients<C> k;
  k.n2 = n2;
  k.lambda = scalar_cast<C>(opt.falcon.ridge) * k.n2;
  k.den = k.n2 + k.lambda + scalar_cast<C>(opt.eps);
  k.eta = k.den > C(0) ? Vec<C>(beta / k.den) : Vec<C>(Vec<C>::Zero(beta.size()));
  const C alpha_max = C(1) - scalar_cast<C>(opt.falcon.eps_gamma);
  k.gamma.resize(beta.size());
  k.clamped.assign(beta.size(), false);
  for (Eigen::Index j = 0; j < beta.size(); ++j) {
    const C alpha = k.eta(j) * k.lambda;
    k.clamped[j] = alpha > alpha_max;
    k.gamma(j) = C(1) - (k.clamped[j] ? alpha_max : alpha);
  }
  return k;
}

template <class C> NlmsCoefficients<C> nlms_coefficients(const Vec<C>& x, const Vec<C>& beta, const NlmsOptions& opt) {
  return nlms_coefficients_of_energy(C(x.squaredNorm()), beta, opt);
}

// The adjoint of nlms_coefficients_of_energy: from dgamma and deta (d_v) the gains' dbeta (d_v) and the
// energy's dn2:
//   gamma_j = 1 - eta_j lambda (unclamped rows):  deta_j -= dgamma_j lambda,  dn2 -= dgamma_j eta_j ridge
//   eta_j = beta_j / den, den = (1 + ridge) n2 + eps:  dbeta_j = deta_j / den,  dn2 -= (1 + ridge) deta . eta / den
// Where the clamp acts (alpha_j = 1 - eps_gamma, a constant) no gradient flows through alpha_j.
template <class T> struct NlmsCoefficientsAdjoint {
  Vec<T> dbeta;  // (d_v)
  T dn2;
};
template <class T>
NlmsCoefficientsAdjoint<T> nlms_coefficients_backward(const NlmsCoefficients<T>& coef, const Vec<T>& dgamma, Vec<T> deta, const NlmsOptions& opt) {
  const T ridge = scalar_cast<T>(opt.falcon.ridge);
  NlmsCoefficientsAdjoint<T> r{Vec<T>::Zero(deta.size()), T(0)};
  for (Eigen::Index j = 0; j < deta.size(); ++j) {
    if (coef.clamped[j]) continue;
    deta(j) -= dgamma(j) * coef.lambda;
    r.dn2 -= dgamma(j) * coef.eta(j) * ridge;
  }
  if (coef.den > T(0)) {
    r.dbeta = deta / coef.den;
    r.dn2 -= (T(1) + ridge) * deta.dot(coef.eta) / coef.den;
  }
  return r;
}

// S_t from S_{t-1} (d_v, d_k) for write feature x, target v and gains beta; c = 1 regression, 0 inner
// product. Also the residual e = v - c S_{t-1} x (the record's ||e_t||).
template <class C> struct NlmsWrite {
  Mat<C> S;
  Vec<C> e;
  NlmsCoefficients<C> coef;
};
template <class C>
NlmsWrite<C> nlms_write(const Mat<C>& S_prev, const Vec<C>& x, const Vec<C>& v, const Vec<C>& beta, const C& c, const NlmsOptions& opt) {
  NlmsWrite<C> w{Mat<C>(), Vec<C>(v - c * (S_prev * x)), nlms_coefficients(x, beta, opt)};
  w.S = w.coef.gamma.asDiagonal() * S_prev;
  w.S.noalias() += Vec<C>(w.coef.eta.cwiseProduct(w.e)) * x.transpose();
  return w;
}

// The memory is the scalar-decay rules' (scalar_decay.hpp: S alone, and S_t on the tape, which is all the
// reverse pass reads: S_t for dq_t, S_{t-1} for the write's adjoint), with FALCON's step in place of theirs.
template <class P> struct NlmsMemory : ScalarDecayMemory<P> {
  using storage_t = typename P::storage_t;
  using compute_t = typename P::compute_t;
  using ScalarDecayMemory<P>::ScalarDecayMemory;
  using ScalarDecayMemory<P>::memory;  // S: (B, d, d), (d_v, d_k) per sequence

  // Sequence b's step from the raw projections (d_h each) and the gains beta (d_h); returns o_t. With a
  // record: ||S_t||_F, ||e_t|| and the map dS_t/dS_{t-1}: S -> diag(gamma) S - diag(eta) S x x^T, which a
  // WriteRecord (a scalar decay and one write direction) holds only when the rows share their gain.
  Vec<storage_t> step(int b, const NlmsOptions& opt, const Vec<compute_t>& q, const Vec<compute_t>& k, const Vec<compute_t>& v,
                      const Vec<compute_t>& beta, const compute_t& c, StepRecord<compute_t>* rec) {
    using C = compute_t;
    const C eps = scalar_cast<C>(opt.eps);
    const Vec<C> x = rms_norm(k, eps);
    const auto w = nlms_write<C>(cast_matrix<C>(memory.S(b)), x, v, beta, c, opt);
    memory.S(b) = cast_matrix<storage_t>(w.S);
    const Vec<storage_t> o = cast_vector<storage_t>(Vec<C>(cast_matrix<C>(memory.S(b)) * rms_norm(q, eps)));
    if (rec) {
      rec->stats[b].S_fro = memory.frobenius_norm(b);
      rec->stats[b].e_norm = to_double(C(w.e.norm()));
      const bool shared = (w.coef.eta.array() == w.coef.eta(0)).all() && (w.coef.gamma.array() == w.coef.gamma(0)).all();
      rec->writes[b] = !shared     ? WriteRecord<C>{x, Vec<C>(), C(1), Mat<C>(), false}  // one map per row: no single M
                       : c == C(0) ? WriteRecord<C>{x, Vec<C>(), w.coef.gamma(0)}  // S -> gamma S
                                   : WriteRecord<C>{x, Vec<C>(w.coef.eta(0) * x), w.coef.gamma(0)};  // S -> S (gamma I - x (eta x)^T)
    }
    return o;
  }
};

// The adjoint of the step above, carrying dS = dL/dS_t:
//   o_t = S_t qf_t:    dS_t += do_t qf_t^T,  dqf_t = S_t^T do_t
//   the write:         delta_write_adjoint_rows (a = gamma, b = eta, c), which gives dv, dx, dgamma, deta
//   the coefficients:  nlms_coefficients_backward, which gives dbeta and dn2
//   n2 = ||x||^2:      dx += 2 dn2 x;  then x = RMSNorm(k), qf = RMSNorm(q) (rms_norm_backward)
// step returns dbeta (d_v); the rule maps it to its gate logits.
template <class T> class NlmsAdjoint {
 protected:
  NlmsAdjoint(const NlmsOptions& opt, int d) : opt_(opt), dS(Mat<T>::Zero(d, d)), zero(Mat<T>::Zero(d, d)) {}

  template <class Tape>
  Vec<T> step(int t, const HeadSequence<T>& x, const Tape& tp, const Mat<T>& dO, HeadGrads<T>& g, const Vec<T>& beta, const T& c) {
    const T eps = scalar_cast<T>(opt_.eps);
    const Vec<T> q = x.q.row(t).transpose(), k = x.k.row(t).transpose(), v = x.v.row(t).transpose();
    const Vec<T> dout = dO.row(t).transpose();
    dS.noalias() += dout * rms_norm(q, eps).transpose();
    g.dq.row(t) = rms_norm_backward<T>(q, Vec<T>(tp.S[t].transpose() * dout), eps).transpose();
    const Vec<T> xf = rms_norm(k, eps);
    const auto coef = nlms_coefficients(xf, beta, opt_);
    const auto w = delta_write_adjoint_rows<T>(dS, t ? tp.S[t - 1] : zero, xf, v, coef.gamma, coef.eta, c);
    g.dv.row(t) = w.dv.transpose();
    const auto dc = nlms_coefficients_backward<T>(coef, w.da, w.db, opt_);
    g.dk.row(t) = rms_norm_backward<T>(k, Vec<T>(w.dk_hat + T(2) * dc.dn2 * xf), eps).transpose();
    return dc.dbeta;
  }

  NlmsOptions opt_;
  Mat<T> dS;          // dL/dS_t, carried backwards
  const Mat<T> zero;  // S_0
};

}  // namespace vla
