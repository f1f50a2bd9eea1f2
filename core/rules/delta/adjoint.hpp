#pragma once
// The adjoint of one delta-rule step (forward.hpp): the write's is delta_write_adjoint's with a = 1,
// b = beta = 2 sigmoid(g), so dg = db * dbeta/dg = db * beta (1 - beta / 2); the read and z are
// NormalisedAdjoint's.
#include "core/rules/delta/forward.hpp"

namespace vla {

template <class P> struct Adjoint<DeltaRule<P>> : NormalisedAdjoint<typename P::compute_t> {
  using T = typename P::compute_t;
  using Tape = typename DeltaRule<P>::State::Tape;

  Adjoint(const DeltaRule<P>& rule, int d) : NormalisedAdjoint<T>(d, T(rule.options().eps)), zero(Mat<T>::Zero(d, d)) {}

  void step(int t, const HeadSequence<T>& x, const Tape& tp, const Mat<T>& dO, HeadGrads<T>& g) {
    NormalisedAdjoint<T>::step(t, x, tp, dO, g, [&](const Vec<T>& k_feat, Vec<T>& dk_feat) {
      const Vec<T> k_hat = unit(k_feat);
      const T beta = DeltaRule<P>::gain(x.g(t, 0));
      const auto w = delta_write_adjoint<T>(this->dS, t ? tp.S[t - 1] : zero, k_hat, Vec<T>(x.v.row(t).transpose()), T(1), beta);
      g.dv.row(t) = w.dv.transpose();
      g.dg(t, 0) = w.db * beta * (T(1) - beta / T(2));
      dk_feat += unit_backward<T>(k_feat, w.dk_hat);
    });
  }

 private:
  const Mat<T> zero;  // S_0
};

}  // namespace vla
