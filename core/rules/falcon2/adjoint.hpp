#pragma once
// The adjoint of one FALCON-2 step (forward.hpp): nlms_memory.hpp's with c = 1, and the gains':
// beta_j = 2 sigmoid(g_j), so dg_j = dbeta_j beta_j (1 - beta_j / 2).
#include "core/rules/falcon2/forward.hpp"

namespace vla {

template <class P> struct Adjoint<Falcon2Rule<P>> : NlmsAdjoint<typename P::compute_t> {
  using T = typename P::compute_t;
  using Tape = typename Falcon2Rule<P>::State::Tape;

  Adjoint(const Falcon2Rule<P>& rule, int d) : NlmsAdjoint<T>(rule.options(), d) {}

  void step(int t, const HeadSequence<T>& x, const Tape& tp, const Mat<T>& dO, HeadGrads<T>& g) {
    const Vec<T> beta = x.g.row(t).transpose().unaryExpr([](const T& l) { return Falcon2Rule<P>::gain(l); });
    const Vec<T> dbeta = NlmsAdjoint<T>::step(t, x, tp, dO, g, beta, T(1));
    g.dg.row(t) = dbeta.cwiseProduct(beta.unaryExpr([](const T& b) { return T(b * (T(1) - b / T(2))); })).transpose();
  }
};

}  // namespace vla
