#pragma once
// The adjoint of one DeltaNet step (forward.hpp, eq. 4); the read and z are NormalisedAdjoint's.
// S_t = beta S_{t-1} + e k_hat^T, e = v - S_{t-1} k_hat, k_hat = unit(phi(k_t)), beta = sigmoid(g):
//   de = dS k_hat,  dv = de,  dk_hat = dS^T e - S_{t-1}^T de,
//   dg = <dS, S_{t-1}>_F beta (1 - beta),  dS_{t-1} = beta dS_t - de k_hat^T.
#include "core/rules/deltanet/forward.hpp"

namespace vla {

template <class P> struct Adjoint<DeltaNetRule<P>> : NormalisedAdjoint<typename P::compute_t> {
  using T = typename P::compute_t;
  using Tape = typename DeltaNetRule<P>::State::Tape;

  Adjoint(const DeltaNetRule<P>& rule, int d)
      : NormalisedAdjoint<T>(d, T(rule.options().eps)), gated(rule.options().gated), zero(Mat<T>::Zero(d, d)) {}

  void step(int t, const HeadSequence<T>& x, const Tape& tp, const Mat<T>& dO, HeadGrads<T>& g) {
    auto& dS = this->dS;
    NormalisedAdjoint<T>::step(t, x, tp, dO, g, [&](const Vec<T>& k_feat, Vec<T>& dk_feat) {
      const int d = static_cast<int>(k_feat.size());
      const Vec<T> v_t = x.v.row(t).transpose();
      Vec<T> dk_hat = Vec<T>::Zero(d);
      const Vec<T> k_hat = unit(k_feat);
      const Mat<T>& S_prev = t ? tp.S[t - 1] : zero;
      const T beta = gated ? sigmoid(x.g(t)) : T(1);
      const Vec<T> e = v_t - S_prev * k_hat;
      const Vec<T> de = dS * k_hat;
      g.dv.row(t) = de.transpose();
      dk_hat += dS.transpose() * e - S_prev.transpose() * de;
      g.dg(t) = gated ? T(dS.cwiseProduct(S_prev).sum() * beta * (T(1) - beta)) : T(0);
      dS *= beta;  // dS_{t-1} = beta dS_t - de k_hat^T
      dS.noalias() -= de * k_hat.transpose();
      dk_feat += unit_backward<T>(k_feat, dk_hat);
    });
  }

 private:
  const bool gated;
  const Mat<T> zero;  // S_0
};

}  // namespace vla
