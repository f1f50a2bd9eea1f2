#pragma once
// The write the delta rules share, on unit keys k_hat = unit(phi(k_t)):
//   S_t = a_t S_{t-1} + b_t e_t k_hat_t^T,   e_t = v_t - c_t S_{t-1} k_hat_t
//   DeltaNet as the paper writes it (eq. 4; deltanet/):          a_t = beta_t = sigmoid(g_t), b_t = c_t = 1
//   the classic delta rule (seed 004 sec. 6.4; delta/):          a_t = c_t = 1, b_t = beta_t in (0, 2)
//   Gated DeltaNet (gated_deltanet/):                            a_t = c_t = alpha_t, b_t = beta_t
// (the forward is MemoryMatrixManager::residual_write(c k_hat, b k_hat, v, a)), and its adjoint, carrying
// dS = dL/dS_t to dL/dS_{t-1}:
//   dv = b dS k_hat,   dk_hat = b dS^T e - c S_{t-1}^T dv,   dS_{t-1} = a dS - c dv k_hat^T,
//   da = <dS, S_{t-1}>_F,   db = e^T dS k_hat,   dc = -dv . S_{t-1} k_hat.
#include "core/scalar.hpp"

namespace vla {

template <class T> struct DeltaWriteAdjoint {
  Vec<T> dv, dk_hat;  // (d_h)
  T da, db, dc;       // the coefficients' gradients (the rule maps them to its gate logits)
};

// dS holds dL/dS_t on entry and dL/dS_{t-1} on return.
template <class T>
DeltaWriteAdjoint<T> delta_write_adjoint(Mat<T>& dS, const Mat<T>& S_prev, const Vec<T>& k_hat, const Vec<T>& v, const T& a,
                                         const T& b, const T& c = T(1)) {
  const Vec<T> Sk = S_prev * k_hat;
  const Vec<T> e = v - c * Sk;
  const Vec<T> dS_k = dS * k_hat;
  DeltaWriteAdjoint<T> r{b * dS_k, Vec<T>(), dS.cwiseProduct(S_prev).sum(), e.dot(dS_k), T(0)};
  r.dc = -r.dv.dot(Sk);
  r.dk_hat = b * (dS.transpose() * e) - c * (S_prev.transpose() * r.dv);
  dS *= a;
  dS.noalias() -= (c * r.dv) * k_hat.transpose();
  return r;
}

}  // namespace vla
