#pragma once
// The memory of the scalar-decay family (seed 004 sec. 5.2-5.3), its step and its adjoint, written
// once for the rules that differ only in where the decay comes from:
//   S_t = gamma_t S_{t-1} + v_t k_t^T,   o_t = S_t q_t
// (the seed's row-vector S_t = gamma_t S_{t-1} + k_t^T v_t, o_t = q_t S_t, stored as (d_v, d_k) like
// every rule here). q and k enter raw: no feature map, no running key sum, no denominator.
//   RetNet (retnet/):  gamma_t = gamma, a constant in (0, 1)
//   Mamba-2 (mamba2/): gamma_t = sigmoid(g_t), the gate logit g_t = w_a^T x_t + b_a of the layer (SSD)
#include "core/memory_matrix_manager.hpp"
#include "core/rules/memory_rule.hpp"

#include <vector>

namespace vla {

template <class P> struct ScalarDecayMemory {
  using storage_t = typename P::storage_t;
  using compute_t = typename P::compute_t;

  MemoryMatrixManager<P> memory;  // S: (B, d, d), (d_v, d_k) per sequence

  // The reverse pass reads S_t (dq_t = S_t^T do_t) and S_{t-1} (a data-dependent decay's gradient).
  struct Tape {
    std::vector<Mat<storage_t>> S;  // n entries, (d_h, d_h): S_t after step t
    void reserve(int n) { S.reserve(n); }
  };
  void record(Tape& tp) const { tp.S.push_back(memory.S(0)); }

  ScalarDecayMemory(int batch, int d) : memory(batch, d, d) {}

  // One sequence's step: S_t from S_{t-1} and gamma_t, then o_t = S_t q_t (computed in compute_t
  // from the stored S_t); with a record, ||S_t||_F and the write (no residual read: dS_t/dS_{t-1} = gamma_t I).
  Vec<storage_t> step(int b, const Vec<compute_t>& q, const Vec<compute_t>& k, const Vec<compute_t>& v,
                      const compute_t& gamma, StepRecord<compute_t>* rec) {
    using C = compute_t;
    memory.S(b) = cast_matrix<storage_t>(Mat<C>(gamma * cast_matrix<C>(memory.S(b)) + v * k.transpose()));
    const Vec<storage_t> o = cast_vector<storage_t>(Vec<C>(cast_matrix<C>(memory.S(b)) * q));
    if (rec) {
      rec->stats[b].S_fro = memory.frobenius_norm(b);
      rec->writes[b] = WriteRecord<C>{k, Vec<C>(), gamma};
    }
    return o;
  }
};

// The adjoint of the step above, carrying dS = dL/dS_t:
//   o_t = S_t q_t:                        dS_t += do_t q_t^T,  dq_t = S_t^T do_t
//   S_t = gamma_t S_{t-1} + v_t k_t^T:    dv_t = dS_t k_t,  dk_t = dS_t^T v_t,  dS_{t-1} = gamma_t dS_t,
//                                         dgamma_t = <dS_t, S_{t-1}>_F (returned; a constant decay drops it)
template <class T> class ScalarDecayAdjoint {
 protected:
  explicit ScalarDecayAdjoint(int d) : dS(Mat<T>::Zero(d, d)), zero(Mat<T>::Zero(d, d)) {}

  template <class Tape>
  T step(int t, const HeadSequence<T>& x, const Tape& tp, const Mat<T>& dO, HeadGrads<T>& g, const T& gamma) {
    const Vec<T> q = x.q.row(t).transpose(), k = x.k.row(t).transpose(), v = x.v.row(t).transpose();
    const Vec<T> dout = dO.row(t).transpose();
    dS.noalias() += dout * q.transpose();
    g.dq.row(t) = (tp.S[t].transpose() * dout).transpose();
    g.dv.row(t) = (dS * k).transpose();
    g.dk.row(t) = (dS.transpose() * v).transpose();
    const T dgamma = dS.cwiseProduct(t ? tp.S[t - 1] : zero).sum();
    dS *= gamma;
    return dgamma;
  }

  Mat<T> dS;         // dL/dS_t, carried backwards
  const Mat<T> zero;  // S_0
};

}  // namespace vla
