#pragma once
// The adjoint of one linear-attention step (forward.hpp, eq. 3); the read and z are
// NormalisedAdjoint's. S_t = S_{t-1} + v w^T with w = phi(k_t) (or unit(phi(k_t)), normalise_key):
//   dv = dS w,  dw = dS^T v,  dS_{t-1} = dS_t (the write does not read S_{t-1}).
#include "core/rules/linear/forward.hpp"

namespace vla {

template <class P> struct Adjoint<LinearAttentionRule<P>> : NormalisedAdjoint<typename P::compute_t> {
  using T = typename P::compute_t;
  using Tape = typename LinearAttentionRule<P>::State::Tape;

  Adjoint(const LinearAttentionRule<P>& rule, int d) : NormalisedAdjoint<T>(d, T(rule.options().eps)), opt(rule.options()) {}

  void step(int t, const HeadSequence<T>& x, const Tape& tp, const Mat<T>& dO, HeadGrads<T>& g) {
    const auto& dS = this->dS;
    NormalisedAdjoint<T>::step(t, x, tp, dO, g, [&](const Vec<T>& k_feat, Vec<T>& dk_feat) {
      const Vec<T> v_t = x.v.row(t).transpose();
      if (!opt.normalise_key) {
        g.dv.row(t) = (dS * k_feat).transpose();
        dk_feat += dS.transpose() * v_t;
      } else {  // w = unit(k_feat): the key gradient passes through unit()'s adjoint
        g.dv.row(t) = (dS * unit(k_feat)).transpose();
        dk_feat += unit_backward<T>(k_feat, Vec<T>(dS.transpose() * v_t));
      }
    });
  }

 private:
  const LinearAttentionOptions opt;
};

}  // namespace vla
