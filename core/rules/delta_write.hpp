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
// The same write with one a and b per row (per value channel), S_t = diag(a) S_{t-1} + diag(b) e k^T, is
// seed 003's FALCON-2 (per-column gains and decays, nlms_memory.hpp; k is then not a unit vector); its
// adjoint is the rows' version of the above: dv = b . (dS k), dk = dS^T (b . e) - c S_{t-1}^T dv,
// dS_{t-1} = diag(a) dS - c dv k^T, da_i = <row i of dS, row i of S_{t-1}>, db_i = e_i (dS k)_i. The scalar
// write's adjoint is the rows' with a and b constant, da and db summed over the rows.
#include "core/scalar.hpp"

namespace vla {

template <class T> struct DeltaWriteAdjoint {
  Vec<T> dv, dk_hat;  // (d_h)
  T da, db, dc;       // the coefficients' gradients (the rule maps them to its gate logits)
};

template <class T> struct DeltaRowsWriteAdjoint {
  Vec<T> dv, dk_hat;  // (d_h)
  Vec<T> da, db;      // (d_v) one per row
  T dc;
};

// dS holds dL/dS_t on entry and dL/dS_{t-1} on return; a, b (d_v).
template <class T>
DeltaRowsWriteAdjoint<T> delta_write_adjoint_rows(Mat<T>& dS, const Mat<T>& S_prev, const Vec<T>& k_hat, const Vec<T>& v,
                                                  const Vec<T>& a, const Vec<T>& b, const T& c) {
  const Vec<T> Sk = S_prev * k_hat;
  const Vec<T> e = v - c * Sk;
  const Vec<T> dS_k = dS * k_hat;
  DeltaRowsWriteAdjoint<T> r{b.cwiseProduct(dS_k), Vec<T>(), dS.cwiseProduct(S_prev).rowwise().sum(), e.cwiseProduct(dS_k), T(0)};
  r.dc = -r.dv.dot(Sk);
  r.dk_hat = dS.transpose() * Vec<T>(b.cwiseProduct(e)) - c * (S_prev.transpose() * r.dv);
  dS = a.asDiagonal() * dS;
  dS.noalias() -= (c * r.dv) * k_hat.transpose();
  return r;
}

// dS holds dL/dS_t on entry and dL/dS_{t-1} on return.
template <class T>
DeltaWriteAdjoint<T> delta_write_adjoint(Mat<T>& dS, const Mat<T>& S_prev, const Vec<T>& k_hat, const Vec<T>& v, const T& a,
                                         const T& b, const T& c = T(1)) {
  const Eigen::Index d = v.size();
  const auto r = delta_write_adjoint_rows<T>(dS, S_prev, k_hat, v, Vec<T>::Constant(d, a), Vec<T>::Constant(d, b), c);
  return {r.dv, r.dk_hat, r.da.sum(), r.db.sum(), r.dc};
}

}  // namespace vla
