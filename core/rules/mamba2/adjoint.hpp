#pragma once
// The adjoint of one Mamba-2 step (forward.hpp, seed 004 sec. 5.3): the scalar-decay family's
// (core/rules/scalar_decay.hpp), and the gate's: gamma_t = sigmoid(g_t), so
//   dg_t = dgamma_t gamma_t (1 - gamma_t),   dgamma_t = <dS_t, S_{t-1}>_F.
#include "core/rules/mamba2/forward.hpp"

namespace vla {

template <class P> struct Adjoint<Mamba2Rule<P>> : ScalarDecayAdjoint<typename P::compute_t> {
  using T = typename P::compute_t;
  using Tape = typename Mamba2Rule<P>::State::Tape;

  Adjoint(const Mamba2Rule<P>&, int d) : ScalarDecayAdjoint<T>(d) {}

  void step(int t, const HeadSequence<T>& x, const Tape& tp, const Mat<T>& dO, HeadGrads<T>& g) {
    const T gamma = sigmoid(x.g(t, 0));
    const T dgamma = ScalarDecayAdjoint<T>::step(t, x, tp, dO, g, gamma);
    g.dg(t, 0) = dgamma * gamma * (T(1) - gamma);
  }
};

}  // namespace vla
