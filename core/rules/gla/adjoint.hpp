#pragma once
// The adjoint of one GLA step (forward.hpp), carrying dS = dL/dS_t:
//   o_t = S_t q_t:                              dS_t += do_t q_t^T,   dq_t = S_t^T do_t
//   S_t = S_{t-1} diag(alpha_t) + v_t k_t^T:    dv_t = dS_t k_t,   dk_t = dS_t^T v_t,
//                                               dalpha_t = column sums of dS_t . S_{t-1},   dS_{t-1} = dS_t diag(alpha_t)
//   alpha_t = sigmoid(g_t):                     dg_t = dalpha_t . alpha_t (1 - alpha_t)
#include "core/rules/gla/forward.hpp"

namespace vla {

template <class P> struct Adjoint<GlaRule<P>> {
  using T = typename P::compute_t;
  using Tape = typename GlaRule<P>::State::Tape;

  Adjoint(const GlaRule<P>&, int d) : dS(Mat<T>::Zero(d, d)), zero(Mat<T>::Zero(d, d)) {}

  void step(int t, const HeadSequence<T>& x, const Tape& tp, const Mat<T>& dO, HeadGrads<T>& g) {
    const Vec<T> q = x.q.row(t).transpose(), k = x.k.row(t).transpose(), v = x.v.row(t).transpose();
    const Vec<T> alpha = x.g.row(t).transpose().unaryExpr([](const T& a) { return sigmoid(a); });
    const Vec<T> dout = dO.row(t).transpose();
    dS.noalias() += dout * q.transpose();
    g.dq.row(t) = (tp.S[t].transpose() * dout).transpose();
    g.dv.row(t) = (dS * k).transpose();
    g.dk.row(t) = (dS.transpose() * v).transpose();
    const Vec<T> dalpha = dS.cwiseProduct(t ? tp.S[t - 1] : zero).colwise().sum().transpose();
    g.dg.row(t) = dalpha.cwiseProduct(alpha.cwiseProduct(Vec<T>(Vec<T>::Ones(alpha.size()) - alpha))).transpose();
    dS = dS * alpha.asDiagonal();
  }

 private:
  Mat<T> dS;          // dL/dS_t, carried backwards
  const Mat<T> zero;  // S_0
};

}  // namespace vla
