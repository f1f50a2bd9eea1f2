#pragma once
// The adjoint of one RetNet step (forward.hpp, seed 004 sec. 5.2): the scalar-decay family's
// (core/rules/scalar_decay.hpp) with the constant gamma, whose gradient the layer does not need.
#include "core/rules/retnet/forward.hpp"

namespace vla {

template <class P> struct Adjoint<RetNetRule<P>> : ScalarDecayAdjoint<typename P::compute_t> {
  using T = typename P::compute_t;
  using Tape = typename RetNetRule<P>::State::Tape;

  Adjoint(const RetNetRule<P>& rule, int d) : ScalarDecayAdjoint<T>(d), gamma(T(rule.options().gamma)) {}

  void step(int t, const HeadSequence<T>& x, const Tape& tp, const Mat<T>& dO, HeadGrads<T>& g) {
    ScalarDecayAdjoint<T>::step(t, x, tp, dO, g, gamma);
  }

 private:
  const T gamma;
};

}  // namespace vla
