#pragma once
// The adjoint of one FALCON-3A step (forward.hpp): sliding_window.hpp's with c = 0, then the coefficients':
//   w = rho / B_t:                     drho = dw / B_t
//   rho = beta / (E_bar + eps):        dbeta = drho / den,  dE_bar = -drho rho / den
//   gamma = 1 - (1 - eps_gamma) s, s = sigmoid(g_1):   dg_1 = -dgamma (1 - eps_gamma) s (1 - s)
//   beta = 2 sigmoid(g_0):             dg_0 = dbeta beta (1 - beta / 2)
// (none where the step is the forced no-op, den = 0).
#include "core/rules/falcon3a/forward.hpp"

namespace vla {

template <class P> struct Adjoint<Falcon3aRule<P>> : SlidingAdjoint<typename P::compute_t> {
  using T = typename P::compute_t;
  using R = Falcon3aRule<P>;
  using Tape = typename R::State::Tape;

  Adjoint(const R& rule, int d) : SlidingAdjoint<T>(rule.options(), d) {}

  void step(int t, const HeadSequence<T>& x, const Tape& tp, const Mat<T>& dO, HeadGrads<T>& g) {
    const T beta = R::gain(x.g(t, 0)), g1 = x.g(t, 1);
    typename R::Coefficients k{};
    int B_t = 1;
    SlidingAdjoint<T>::step(
        t, x, tp, dO, g, T(0),
        [&](const T& E_bar, int Bt) {
          k = R::coefficients(E_bar, beta, g1, this->opt_);
          B_t = Bt;
          return R::write_coefficients(k, Bt);
        },
        [&](const T& dgamma, const T& dw) {
          if (!(k.den > T(0))) return T(0);  // the forced no-op: rho, alpha constant
          const T drho = dw / T(B_t), s = sigmoid(g1);
          g.dg(t, 0) = drho / k.den * beta * (T(1) - beta / T(2));
          g.dg(t, 1) = -dgamma * (T(1) - scalar_cast<T>(this->opt_.falcon.eps_gamma)) * s * (T(1) - s);
          return T(-drho * k.rho / k.den);
        });
  }
};

}  // namespace vla
