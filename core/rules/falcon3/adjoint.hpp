#pragma once
// The adjoint of one FALCON-3 step (forward.hpp): sliding_window.hpp's with c = 1; the coefficients'
// through nlms_coefficients_backward (w = eta / B_t: deta = dw / B_t), and the gain's:
// beta = 2 sigmoid(g), so dg = dbeta beta (1 - beta / 2).
#include "core/rules/falcon3/forward.hpp"

namespace vla {

template <class P> struct Adjoint<Falcon3Rule<P>> : SlidingAdjoint<typename P::compute_t> {
  using T = typename P::compute_t;
  using R = Falcon3Rule<P>;
  using Tape = typename R::State::Tape;

  Adjoint(const R& rule, int d) : SlidingAdjoint<T>(rule.options(), d) {}

  void step(int t, const HeadSequence<T>& x, const Tape& tp, const Mat<T>& dO, HeadGrads<T>& g) {
    const T beta = R::gain(x.g(t, 0));
    NlmsCoefficients<T> k;
    int B_t = 1;
    SlidingAdjoint<T>::step(
        t, x, tp, dO, g, T(1),
        [&](const T& E_bar, int Bt) {
          k = R::coefficients(E_bar, beta, this->opt_);
          B_t = Bt;
          return R::write_coefficients(k, Bt);
        },
        [&](const T& dgamma, const T& dw) {
          const auto dc = nlms_coefficients_backward<T>(k, Vec<T>::Constant(1, dgamma), Vec<T>::Constant(1, dw / T(B_t)), this->opt_);
          g.dg(t, 0) = dc.dbeta(0) * beta * (T(1) - beta / T(2));
          return dc.dn2;
        });
  }
};

}  // namespace vla
