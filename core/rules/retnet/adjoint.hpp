#pragma once
// The adjoint of one RetNet step (forward.hpp, seed 004 sec. 5.2), carrying dS = dL/dS_t:
//   o_t = S_t q_t:                      dS_t += do_t q_t^T,   dq_t = S_t^T do_t
//   S_t = gamma S_{t-1} + v_t k_t^T:    dv_t = dS_t k_t,      dk_t = dS_t^T v_t,   dS_{t-1} = gamma dS_t
#include "core/rules/retnet/forward.hpp"

namespace vla {

template <class P> struct Adjoint<RetNetRule<P>> {
  using T = typename P::compute_t;
  using Tape = typename RetNetRule<P>::State::Tape;

  Adjoint(const RetNetRule<P>& rule, int d) : gamma(T(rule.options().gamma)), dS(Mat<T>::Zero(d, d)) {}

  void step(int t, const HeadSequence<T>& x, const Tape& tp, const Mat<T>& dO, HeadGrads<T>& g) {
    const Vec<T> q = x.q.row(t).transpose(), k = x.k.row(t).transpose(), v = x.v.row(t).transpose();
    const Vec<T> dout = dO.row(t).transpose();
    dS.noalias() += dout * q.transpose();
    g.dq.row(t) = (tp.S[t].transpose() * dout).transpose();
    g.dv.row(t) = (dS * k).transpose();
    g.dk.row(t) = (dS.transpose() * v).transpose();
    dS *= gamma;
  }

 private:
  const T gamma;
  Mat<T> dS;  // dL/dS_t, carried backwards
};

}  // namespace vla
