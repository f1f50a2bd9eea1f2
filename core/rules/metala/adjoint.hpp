#pragma once
// The adjoint of one MetaLA step (forward.hpp): GLA's (core/rules/vector_decay.hpp) with the written key
// kappa_t = 1 - alpha_t. Both the decay and the key are functions of the gate logits, so
//   dg_t = (dalpha_t - dkappa_t) . alpha_t (1 - alpha_t),
// dalpha_t = column sums of dS_t . S_{t-1}, dkappa_t = dS_t^T v_t; the layer's key gets no gradient.
#include "core/rules/metala/forward.hpp"

namespace vla {

template <class P> struct Adjoint<MetaLaRule<P>> : VectorDecayAdjoint<typename P::compute_t> {
  using T = typename P::compute_t;
  using Tape = typename MetaLaRule<P>::State::Tape;

  Adjoint(const MetaLaRule<P>&, int d) : VectorDecayAdjoint<T>(d) {}

  void step(int t, const HeadSequence<T>& x, const Tape& tp, const Mat<T>& dO, HeadGrads<T>& g) {
    const Vec<T> logits = x.g.row(t).transpose();
    const Vec<T> alpha = channel_decays(logits);
    const auto w = VectorDecayAdjoint<T>::step(t, x.q.row(t).transpose(), channel_complements(logits), x.v.row(t).transpose(), alpha,
                                               tp, dO, g);
    g.dg.row(t) = channel_decay_backward<T>(Vec<T>(w.dalpha - w.dk), alpha).transpose();
  }
};

}  // namespace vla
