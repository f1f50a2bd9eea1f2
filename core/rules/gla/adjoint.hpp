#pragma once
// The adjoint of one GLA step (forward.hpp): the vector-gate family's (core/rules/vector_decay.hpp),
// with the write's dk the key's gradient and the gate's
//   alpha_t = sigmoid(g_t):   dg_t = dalpha_t . alpha_t (1 - alpha_t),   dalpha_t = column sums of dS_t . S_{t-1}.
#include "core/rules/gla/forward.hpp"

namespace vla {

template <class P> struct Adjoint<GlaRule<P>> : VectorDecayAdjoint<typename P::compute_t> {
  using T = typename P::compute_t;
  using Tape = typename GlaRule<P>::State::Tape;

  Adjoint(const GlaRule<P>&, int d) : VectorDecayAdjoint<T>(d) {}

  void step(int t, const HeadSequence<T>& x, const Tape& tp, const Mat<T>& dO, HeadGrads<T>& g) {
    const Vec<T> alpha = channel_decays<T>(x.g.row(t).transpose());
    const auto w = VectorDecayAdjoint<T>::step(t, x.q.row(t).transpose(), x.k.row(t).transpose(), x.v.row(t).transpose(), alpha, tp, dO, g);
    g.dk.row(t) = w.dk.transpose();
    g.dg.row(t) = channel_decay_backward<T>(w.dalpha, alpha).transpose();
  }
};

}  // namespace vla
