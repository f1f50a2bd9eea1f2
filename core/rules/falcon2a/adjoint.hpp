#pragma once
// The adjoint of one FALCON-2A step (forward.hpp): nlms_memory.hpp's with c = 0, and the gain's: every row
// uses beta = 2 sigmoid(g), so dg = (sum_j dbeta_j) beta (1 - beta / 2).
#include "core/rules/falcon2a/forward.hpp"

namespace vla {

template <class P> struct Adjoint<Falcon2aRule<P>> : NlmsAdjoint<typename P::compute_t> {
  using T = typename P::compute_t;
  using Tape = typename Falcon2aRule<P>::State::Tape;

  Adjoint(const Falcon2aRule<P>& rule, int d) : NlmsAdjoint<T>(rule.options(), d) {}

  void step(int t, const HeadSequence<T>& x, const Tape& tp, const Mat<T>& dO, HeadGrads<T>& g) {
    const T beta = Falcon2aRule<P>::gain(x.g(t, 0));
    const Vec<T> dbeta = NlmsAdjoint<T>::step(t, x, tp, dO, g, Vec<T>::Constant(x.q.cols(), beta), T(0));
    g.dg(t, 0) = dbeta.sum() * beta * (T(1) - beta / T(2));
  }
};

}  // namespace vla
