#pragma once
// Backward of one head of causal softmax attention (forward.hpp, eq. 2) over the whole sequence,
// recomputing the attention weights from q, k (the forward keeps no T x T matrix: recomputing P costs
// one more O(T^2 d) pass, storing it T^2 per head; both are small here). Not a step adjoint: every
// o_t reads every k_s, v_s, s <= t, so the gradients of k_s, v_s are sums over later queries.
//   P_ts = softmax_s(q_t . k_s / sqrt(d)) (s <= t),  o_t = sum_s P_ts v_s
//   dv_s += P_ts do_t;  dP_ts = do_t . v_s;  dlogit_ts = P_ts (dP_ts - sum_r P_tr dP_tr)
#include "core/rules/softmax/forward.hpp"

#include <cmath>

namespace vla {

template <class T>
void softmax_head_backward(const Mat<T>& q, const Mat<T>& k, const Mat<T>& v, const Mat<T>& dO, Mat<T>& dq,
                           Mat<T>& dk, Mat<T>& dv) {
  using std::exp;
  using std::sqrt;
  const int n = static_cast<int>(q.rows()), d = static_cast<int>(q.cols());
  const T sc = T(1) / T(sqrt(T(d)));
  dq.setZero(); dk.setZero(); dv.setZero();
  for (int t = 0; t < n; ++t) {
    Vec<T> P(t + 1);  // (t+1) attention weights of query t
    for (int s = 0; s <= t; ++s) P(s) = q.row(t).dot(k.row(s)) * sc;
    const T m = P.maxCoeff();
    for (int s = 0; s <= t; ++s) P(s) = exp(T(P(s) - m));
    P /= P.sum();
    Vec<T> dP(t + 1);
    for (int s = 0; s <= t; ++s) {
      dv.row(s) += P(s) * dO.row(t);
      dP(s) = dO.row(t).dot(v.row(s));
    }
    const T mean = P.dot(dP);
    for (int s = 0; s <= t; ++s) {
      const T dl = P(s) * (dP(s) - mean) * sc;
      dq.row(t) += dl * k.row(s);
      dk.row(s) += dl * q.row(t);
    }
  }
}

// The rule's reverse pass (core/model/head.hpp calls sequence(), not step(): recurrent = false).
template <class P> struct Adjoint<SoftmaxRule<P>> {
  using T = typename P::compute_t;
  Adjoint(const SoftmaxRule<P>&, int) {}
  void sequence(const HeadSequence<T>& x, const Mat<T>& dO, HeadGrads<T>& g) const {
    softmax_head_backward<T>(x.q, x.k, x.v, dO, g.dq, g.dk, g.dv);
  }
};

}  // namespace vla
