#pragma once
// Backward of one head of causal softmax attention (eq. 2), recomputing the attention weights from
// q, k (the forward keeps no T x T matrix: recomputing P costs one more O(T^2 d) pass, storing it
// T^2 per head; both are small here, recomputing keeps the tape uniform).
//   P_ts = softmax_s(q_t . k_s / sqrt(d)) (s <= t),  o_t = sum_s P_ts v_s
//   dv_s += P_ts do_t;  dP_ts = do_t . v_s;  dlogit_ts = P_ts (dP_ts - sum_r P_tr dP_tr)
#include "core/scalar.hpp"

#include <cmath>

namespace vla::model {

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

}  // namespace vla::model
