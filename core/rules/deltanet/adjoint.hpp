#pragma once
// The adjoint of one DeltaNet step (forward.hpp, eq. 4): the write's is delta_write_adjoint's with
// a = beta = sigmoid(g), b = 1, so dg = da * beta (1 - beta); the read and z are NormalisedAdjoint's.
#include "core/rules/deltanet/forward.hpp"

namespace vla {

template <class P> struct Adjoint<DeltaNetRule<P>> : NormalisedAdjoint<typename P::compute_t> {
  using T = typename P::compute_t;
  using Tape = typename DeltaNetRule<P>::State::Tape;

  Adjoint(const DeltaNetRule<P>& rule, int d)
      : NormalisedAdjoint<T>(d, T(rule.options().eps)), gated(rule.options().gated), zero(Mat<T>::Zero(d, d)) {}

  void step(int t, const HeadSequence<T>& x, const Tape& tp, const Mat<T>& dO, HeadGrads<T>& g) {
    NormalisedAdjoint<T>::step(t, x, tp, dO, g, [&](const Vec<T>& k_feat, Vec<T>& dk_feat) {
      const Vec<T> k_hat = unit(k_feat);
      const T beta = gated ? sigmoid(x.g(t, 0)) : T(1);
      const auto w = delta_write_adjoint<T>(this->dS, t ? tp.S[t - 1] : zero, k_hat, Vec<T>(x.v.row(t).transpose()), beta, T(1));
      g.dv.row(t) = w.dv.transpose();
      g.dg(t, 0) = gated ? T(w.da * beta * (T(1) - beta)) : T(0);
      dk_feat += unit_backward<T>(k_feat, w.dk_hat);
    });
  }

 private:
  const bool gated;
  const Mat<T> zero;  // S_0
};

}  // namespace vla
