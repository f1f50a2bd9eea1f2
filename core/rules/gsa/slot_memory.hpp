#pragma once
// The slot memories of Gated Slot Attention and of MVA (seed 002 sec. 2.3 and eq. 6), forward and
// reverse, written once: GSA is the case of one key memory without the linear branch (gsa/), MVA
// the case of c key memories with it (mva/).
//
// The state. GSA keeps two memories of m slots, keys and values (seed 002 sec. 2.3, row form
// K_t (m, d_k), V_t (m, d_v)):
//   K_t = diag(g_t) K_{t-1} + (1 - g_t)^T k_t,   V_t = diag(g_t) V_{t-1} + (1 - g_t)^T v_t
// each a MetaLA memory (metala/: GLA's write with the key tied to the gate, core/rules/vector_decay.hpp)
// whose written value is k_t or v_t. Here m = d_h slots (the layer's gate projection gives d_h logits per
// head and token, one decay per slot; seed 002 takes C, W_S, W_kc all (d, d), i.e. m = d), stored as
// every memory here with the slots as columns: V (d_v, m), K^(i) (d_k, m). The toolkit's state is one
// matrix per sequence (MemoryMatrixManager: the non-finite check and ||S_t||_F read it), so the
// memories sit side by side in one (d, (c + 1) m) matrix
//   S_t = [V_t | K_t^(0) | ... | K_t^(c-1)]
// (c = 1 for GSA). Every memory decays by the same alpha_t = sigmoid(g_t) and writes with the same key
// 1 - alpha_t (seed 002 eq. 6: f_g = f_alpha; one gate projection, so every level shares it, and the
// value memories V^(i) of eq. 6, all written with v_t, are one).
//
// The step, for c levels (k^(0) = k_t):
//   V_t = V_{t-1} diag(alpha_t) + v_t (1 - alpha_t)^T
//   K_t^(i) = K_{t-1}^(i) diag(alpha_t) + k^(i) (1 - alpha_t)^T                       (eq. 6 line 1)
//   p^(i) = softmax(K_t^(i)T q_t)                     the slot attention of the query (sec. 2.3)
//   k^(i+1) = k^(i) - K_t^(i) sel(K_t^(i)T k^(i))     the residual after reading level i (eq. 4)
//   o_t = [V_t q_t] + V_t (1/c) sum_i p^(i)           (the bracket: MVA's linear branch, eq. 6's P_MetaLA)
// sel is softmax (the relaxation seed 002 sec. 3.2 uses in place of eq. 4's one-hot S) or the one-hot
// S itself (hard_select; no gradient through the selection). q, k enter raw (phi_q = phi_k = identity,
// eq. 6). The reads use the stored (rounded) memories, as every rule here.
#include "core/memory_matrix_manager.hpp"
#include "core/rules/vector_decay.hpp"

#include <fmt/format.h>

#include <limits>
#include <stdexcept>
#include <vector>

namespace vla {

// softmax(s) over the slots, the maximum subtracted first. A score that is not finite gives NaN
// everywhere (inf - inf), never a finite distribution.
template <class C> Vec<C> slot_softmax(const Vec<C>& s) {
  using std::exp;
  const C m = s.maxCoeff();
  const Vec<C> e = s.unaryExpr([&](const C& x) { return C(exp(C(x - m))); });
  return e / e.sum();
}

// The one-hot S of seed 002 eq. 4: 1 at the first largest score. NaN everywhere if a score is not finite.
template <class C> Vec<C> slot_one_hot(const Vec<C>& s) {
  if (!all_finite(s)) return Vec<C>::Constant(s.size(), scalar_cast<C>(std::numeric_limits<double>::quiet_NaN()));
  Eigen::Index j = 0;
  s.maxCoeff(&j);
  Vec<C> e = Vec<C>::Zero(s.size());
  e(j) = C(1);
  return e;
}

// The adjoint of p = softmax(s): ds = p . (dp - p^T dp).
template <class T> Vec<T> slot_softmax_backward(const Vec<T>& p, const Vec<T>& dp) {
  return p.cwiseProduct(Vec<T>(dp - Vec<T>::Constant(dp.size(), p.dot(dp))));
}

struct SlotOptions {
  int levels = 1;              // c: key memories (GSA 1)
  bool linear_branch = false;  // MVA's P_MetaLA = q (W_qc = I): o += V_t q_t
  bool hard_select = false;    // the residual's selection: eq. 4's one-hot S instead of softmax
  void validate() const {
    if (levels < 1 || levels > 64)
      throw std::invalid_argument(fmt::format("mva_levels: the levels c must be an integer in [1, 64], got {}", levels));
  }
};

template <class P> struct SlotMemory {
  using storage_t = typename P::storage_t;
  using compute_t = typename P::compute_t;

  MemoryMatrixManager<P> memory;  // S: (B, d, (c + 1) d) per sequence, [V | K^(0) | ... | K^(c-1)]

  // The reverse pass reads S_t (the reads, and the residuals recomputed from it) and S_{t-1} (the gate's
  // gradient).
  struct Tape {
    std::vector<Mat<storage_t>> S;  // n entries, (d_h, (c + 1) d_h): S_t after step t
    void reserve(int n) { S.reserve(n); }
  };
  void record(Tape& tp) const { tp.S.push_back(memory.S(0)); }

  SlotMemory(int batch, int d, int levels) : memory(batch, d, (levels + 1) * d) {}

  // One sequence's step (the header's equations), o_t returned in storage_t; g the d gate logits. With a
  // record: ||S_t||_F of the whole state, and as e_norm ||k^(c)||, the key's residual after the c levels
  // (eq. 5's E for this token; computed only when a record is asked for).
  Vec<storage_t> step(int b, const Vec<compute_t>& q, const Vec<compute_t>& k, const Vec<compute_t>& v, const Vec<compute_t>& g,
                      const SlotOptions& opt, StepRecord<compute_t>* rec) {
    using C = compute_t;
    using S = storage_t;
    const int d = static_cast<int>(q.size()), c = opt.levels;
    const Vec<C> alpha = channel_decays(g), kappa = channel_complements(g);
    Mat<S>& M = memory.S(b);
    // Each memory is written, rounded to storage, and read back from storage.
    auto write = [&](int block, const Vec<C>& x) {
      M.middleCols(block * d, d) = cast_matrix<S>(vector_decay_write<C>(cast_matrix<C>(Mat<S>(M.middleCols(block * d, d))), alpha, x, kappa));
      return cast_matrix<C>(Mat<S>(M.middleCols(block * d, d)));
    };
    const Mat<C> V = write(0, v);
    Vec<C> kk = k, pbar = Vec<C>::Zero(d);
    for (int i = 0; i < c; ++i) {
      const Mat<C> K = write(i + 1, kk);
      pbar += slot_softmax<C>(K.transpose() * q);
      if (i + 1 < c || rec) {
        const Vec<C> r = K.transpose() * kk;
        kk -= K * (opt.hard_select ? slot_one_hot<C>(r) : slot_softmax<C>(r));
      }
    }
    Vec<C> o = V * Vec<C>(pbar / C(c));
    if (opt.linear_branch) o = Vec<C>(V * q) + o;
    if (rec) {
      rec->stats[b].S_fro = memory.frobenius_norm(b);
      rec->stats[b].e_norm = to_double(kk.norm());
      // kappa: the key every memory writes. With one level each memory maps S -> S diag(alpha_t); with more,
      // level i + 1 writes a key read from level i's memory, so dS_t/dS_{t-1} is no longer that map.
      rec->writes[b] = WriteRecord<C>{kappa, Vec<C>(), C(1), Mat<C>(alpha.asDiagonal()), c == 1};
    }
    return cast_vector<S>(o);
  }
};

// The adjoint of SlotMemory::step, carrying dM^(j) = dL/d(block j of S_t) (j = 0: V, j = i + 1: K^(i)) from
// step t to t - 1. The forward's residual keys and attentions are recomputed from the stored S_t.
// Reverse order of the levels (k^(i+1) depends on level i):
//   o = [V q] + V pbar:              dV += do ([q] + pbar)^T,  dq = [V^T do],  dp^(i) = V^T do / c
//   p^(i) = softmax(K^(i)T q):       ds = softmax_backward,  dK^(i) += q ds^T,  dq += K^(i) ds
//   k^(i+1) = k^(i) - K^(i) rho:     dk^(i) = dk^(i+1),  dK^(i) -= dk^(i+1) rho^T,  drho = -K^(i)T dk^(i+1),
//     rho = softmax(K^(i)T k^(i))    dr = softmax_backward,  dK^(i) += k^(i) dr^T,  dk^(i) += K^(i) dr   (one-hot: no dr)
//   K^(i) = K^(i) diag(alpha) + k^(i) kappa^T, V likewise: vector_decay_write_adjoint (dk^(i), dv, dkappa, dalpha)
//   dg = (dalpha - dkappa) . alpha (1 - alpha)      (alpha = sigmoid(g), kappa = 1 - alpha)
template <class T> class SlotAdjoint {
 protected:
  SlotAdjoint(int d, const SlotOptions& opt) : opt_(opt), dM(opt.levels + 1, Mat<T>::Zero(d, d)), zero(Mat<T>::Zero(d, (opt.levels + 1) * d)) {}

  template <class Tape> void step(int t, const HeadSequence<T>& x, const Tape& tp, const Mat<T>& dO, HeadGrads<T>& g) {
    const int d = static_cast<int>(x.q.cols()), c = opt_.levels;
    const Vec<T> q = x.q.row(t).transpose(), v = x.v.row(t).transpose(), logits = x.g.row(t).transpose();
    const Vec<T> alpha = channel_decays(logits), kappa = channel_complements(logits);
    const Mat<T>& M = tp.S[t];
    const Mat<T>& M_prev = t ? tp.S[t - 1] : zero;
    auto block = [&](const Mat<T>& m, int j) { return Mat<T>(m.middleCols(j * d, d)); };
    // The forward's residual keys k^(0..c-1), the slot attentions p^(i) and the selections rho^(i).
    std::vector<Vec<T>> kk(c), p(c), rho(c);
    kk[0] = x.k.row(t).transpose();
    Vec<T> pbar = Vec<T>::Zero(d);
    for (int i = 0; i < c; ++i) {
      const Mat<T> K = block(M, i + 1);
      p[i] = slot_softmax<T>(K.transpose() * q);
      pbar += p[i];
      if (i + 1 < c) {
        const Vec<T> r = K.transpose() * kk[i];
        rho[i] = opt_.hard_select ? slot_one_hot<T>(r) : slot_softmax<T>(r);
        kk[i + 1] = kk[i] - K * rho[i];
      }
    }
    pbar /= T(c);
    const Mat<T> V = block(M, 0);
    const Vec<T> dout = dO.row(t).transpose();
    const Vec<T> dp = V.transpose() * dout / T(c);
    dM[0].noalias() += dout * pbar.transpose();
    Vec<T> dq = Vec<T>::Zero(d), dkappa = Vec<T>::Zero(d), dalpha = Vec<T>::Zero(d);
    if (opt_.linear_branch) {
      dM[0].noalias() += dout * q.transpose();
      dq += V.transpose() * dout;
    }
    Vec<T> dk_next = Vec<T>::Zero(d);  // dL/dk^(i+1)
    for (int i = c - 1; i >= 0; --i) {
      const Mat<T> K = block(M, i + 1);
      Mat<T>& dK = dM[i + 1];
      const Vec<T> ds = slot_softmax_backward<T>(p[i], dp);
      dK.noalias() += q * ds.transpose();
      dq += K * ds;
      Vec<T> dk = Vec<T>::Zero(d);
      if (i + 1 < c) {
        dk = dk_next;
        dK.noalias() -= dk_next * rho[i].transpose();
        if (!opt_.hard_select) {
          const Vec<T> dr = slot_softmax_backward<T>(rho[i], Vec<T>(-(K.transpose() * dk_next)));
          dK.noalias() += kk[i] * dr.transpose();
          dk += K * dr;
        }
      }
      const auto w = vector_decay_write_adjoint<T>(dK, block(M_prev, i + 1), alpha, kk[i], kappa);
      dk += w.dv;
      dkappa += w.dk;
      dalpha += w.dalpha;
      dk_next = dk;
    }
    const auto w = vector_decay_write_adjoint<T>(dM[0], block(M_prev, 0), alpha, v, kappa);
    g.dq.row(t) = dq.transpose();
    g.dk.row(t) = dk_next.transpose();
    g.dv.row(t) = w.dv.transpose();
    g.dg.row(t) = channel_decay_backward<T>(Vec<T>(dalpha + w.dalpha - dkappa - w.dk), alpha).transpose();
  }

 private:
  SlotOptions opt_;
  std::vector<Mat<T>> dM;  // c + 1 entries (d, d): dL/dV_t, dL/dK_t^(i), carried backwards
  const Mat<T> zero;       // S_0
};

}  // namespace vla
