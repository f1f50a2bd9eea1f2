#pragma once
// The adjoint of one Gated DeltaNet step (forward.hpp): the write's is delta_write_adjoint's with
// a = c = alpha = sigmoid(g_0), b = beta = sigmoid(g_1), so
//   dg_0 = (da + dc) alpha (1 - alpha),   dg_1 = db beta (1 - beta);
// the read and z are NormalisedAdjoint's.
#include "core/rules/gated_deltanet/forward.hpp"

namespace vla {

template <class P> struct Adjoint<GatedDeltaNetRule<P>> : NormalisedAdjoint<typename P::compute_t> {
  using T = typename P::compute_t;
  using Tape = typename GatedDeltaNetRule<P>::State::Tape;

  Adjoint(const GatedDeltaNetRule<P>& rule, int d) : NormalisedAdjoint<T>(d, T(rule.options().eps)), zero(Mat<T>::Zero(d, d)) {}

  void step(int t, const HeadSequence<T>& x, const Tape& tp, const Mat<T>& dO, HeadGrads<T>& g) {
    NormalisedAdjoint<T>::step(t, x, tp, dO, g, [&](const Vec<T>& k_feat, Vec<T>& dk_feat) {
      const Vec<T> k_hat = unit(k_feat);
      const T alpha = sigmoid(x.g(t, 0)), beta = sigmoid(x.g(t, 1));
      const auto w = delta_write_adjoint<T>(this->dS, t ? tp.S[t - 1] : zero, k_hat, Vec<T>(x.v.row(t).transpose()), alpha, beta, alpha);
      g.dv.row(t) = w.dv.transpose();
      g.dg(t, 0) = (w.da + w.dc) * alpha * (T(1) - alpha);
      g.dg(t, 1) = w.db * beta * (T(1) - beta);
      dk_feat += unit_backward<T>(k_feat, w.dk_hat);
    });
  }

 private:
  const Mat<T> zero;  // S_0
};

}  // namespace vla
