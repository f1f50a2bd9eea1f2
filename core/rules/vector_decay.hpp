#pragma once
// The memory of the vector-gate family, its step and its adjoint, written once for the rules that
// differ only in the key they write (seed 004 sec. 5.4 GLA, seed 002 eq. 2 MetaLA):
//   S_t = S_{t-1} diag(alpha_t) + v_t k_t^T,   o_t = S_t q_t,   alpha_t = sigmoid(g_t) in (0, 1)^{d_k}
// (the seeds' row-vector S_t = diag(alpha_t) S_{t-1} + k_t^T v_t, o_t = q_t S_t, stored (d_v, d_k) as every
// rule here): one decay per key channel, from d_h gate logits per head and token (the layer's gate
// projection, Needs::kPerChannel).
//   GLA (gla/):       k_t the layer's key
//   MetaLA (metala/): k_t = 1 - alpha_t, the key tied to the gate
// The write and its adjoint are also the slot memories' of GSA and MVA (gsa/, mva/), which write keys and
// values into slots with the same tied key.
#include "core/rules/scalar_decay.hpp"

namespace vla {

// The decays alpha = sigmoid(g) of a column of gate logits (one per channel), and 1 - alpha computed as
// sigmoid(-g): the same number in exact arithmetic, without the cancellation 1 - alpha suffers when
// alpha rounds to 1 (a logit of 40 gives 1 - alpha = 0 in double, sigmoid(-40) = 4e-18).
template <class C> Vec<C> channel_decays(const Vec<C>& g) {
  return g.unaryExpr([](const C& x) { return sigmoid(x); });
}
template <class C> Vec<C> channel_complements(const Vec<C>& g) {
  return g.unaryExpr([](const C& x) { return sigmoid(C(-x)); });
}

// S diag(alpha) + v k^T: S (d_v, d_k), alpha and k (d_k), v (d_v).
template <class C> Mat<C> vector_decay_write(const Mat<C>& S, const Vec<C>& alpha, const Vec<C>& v, const Vec<C>& k) {
  return S * alpha.asDiagonal() + v * k.transpose();
}

// The adjoint of the write above, carrying dS = dL/dS_t in place to dL/dS_{t-1} = dS_t diag(alpha_t):
//   dv = dS_t k,   dk = dS_t^T v,   dalpha = column sums of dS_t . S_{t-1}.
template <class T> struct VectorDecayWriteGrads {
  Vec<T> dv, dk, dalpha;
};
template <class T>
VectorDecayWriteGrads<T> vector_decay_write_adjoint(Mat<T>& dS, const Mat<T>& S_prev, const Vec<T>& alpha, const Vec<T>& v,
                                                    const Vec<T>& k) {
  VectorDecayWriteGrads<T> g{dS * k, dS.transpose() * v, dS.cwiseProduct(S_prev).colwise().sum().transpose()};
  dS = dS * alpha.asDiagonal();
  return g;
}

// dL/dg of alpha = sigmoid(g), from dL/dalpha: dalpha . alpha (1 - alpha).
template <class T> Vec<T> channel_decay_backward(const Vec<T>& dalpha, const Vec<T>& alpha) {
  return dalpha.cwiseProduct(alpha.cwiseProduct(Vec<T>(Vec<T>::Ones(alpha.size()) - alpha)));
}

// The scalar-decay family's memory and tape (scalar_decay.hpp: S per sequence, S_t kept for the reverse
// pass), stepped with a decay per key channel.
template <class P> struct VectorDecayMemory : ScalarDecayMemory<P> {
  using storage_t = typename P::storage_t;
  using compute_t = typename P::compute_t;
  using ScalarDecayMemory<P>::ScalarDecayMemory;
  using ScalarDecayMemory<P>::memory;

  // One sequence's step: S_t from S_{t-1}, alpha_t and the written key k, then o_t = S_t q (computed in
  // compute_t from the stored S_t); with a record, ||S_t||_F and the write.
  Vec<storage_t> step(int b, const Vec<compute_t>& q, const Vec<compute_t>& k, const Vec<compute_t>& v,
                      const Vec<compute_t>& alpha, StepRecord<compute_t>* rec) {
    using C = compute_t;
    memory.S(b) = cast_matrix<storage_t>(vector_decay_write<C>(cast_matrix<C>(memory.S(b)), alpha, v, k));
    const Vec<storage_t> o = cast_vector<storage_t>(Vec<C>(cast_matrix<C>(memory.S(b)) * q));
    if (rec) {
      rec->stats[b].S_fro = memory.frobenius_norm(b);
      rec->writes[b] = WriteRecord<C>{k, Vec<C>(), C(1), Mat<C>(alpha.asDiagonal())};  // dS_t/dS_{t-1}: S -> S diag(alpha_t)
    }
    return o;
  }
};

// The adjoint of the step above, carrying dS = dL/dS_t (ScalarDecayAdjoint's state):
//   o_t = S_t q_t:                              dS_t += do_t q_t^T,   dq_t = S_t^T do_t
//   S_t = S_{t-1} diag(alpha_t) + v_t k_t^T:    vector_decay_write_adjoint (dv, dk, dalpha)
// The rule maps dk and dalpha to its inputs (GLA: dk to the key, dalpha to the gate logits; MetaLA: both
// to the gate logits).
template <class T> class VectorDecayAdjoint : ScalarDecayAdjoint<T> {
 protected:
  explicit VectorDecayAdjoint(int d) : ScalarDecayAdjoint<T>(d) {}

  // Row t of dq and dv; returns the write's dk and dalpha (dv included).
  template <class Tape>
  VectorDecayWriteGrads<T> step(int t, const Vec<T>& q, const Vec<T>& k, const Vec<T>& v, const Vec<T>& alpha, const Tape& tp,
                                const Mat<T>& dO, HeadGrads<T>& g) {
    Mat<T>& dS = this->dS;
    const Vec<T> dout = dO.row(t).transpose();
    dS.noalias() += dout * q.transpose();
    g.dq.row(t) = (tp.S[t].transpose() * dout).transpose();
    auto w = vector_decay_write_adjoint<T>(dS, t ? tp.S[t - 1] : this->zero, alpha, v, k);
    g.dv.row(t) = w.dv.transpose();
    return w;
  }
};

}  // namespace vla
