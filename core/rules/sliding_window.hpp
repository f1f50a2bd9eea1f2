#pragma once
// The memory of seed 003's sliding-window rules, its step and its adjoint, written once for the two
// rules that differ only in their local objective (FALCON-3 regression, FALCON-3A inner product):
//
//   x_t = RMSNorm(k_t),  qf_t = RMSNorm(q_t)                                           (sec. 4.1)
//   W_t = the last B pairs (x_j, v_j), j = t-B_t+1..t, B_t = |W_t| = min(t, B)          (Algorithm 3, line 7)
//   E_bar_t = (1/B_t) sum_{j in W_t} ||x_j||^2                                          (Algorithm 3, lines 11, 13)
//   S_t = gamma_t S_{t-1} + w_t sum_{j in W_t} (v_j - c S_{t-1} x_j) x_j^T,  o_t = S_t qf_t   (read after write)
//     c = 1: FALCON-3, eq. (4.13) / Algorithm 3 line 15, w_t = eta_t / B_t   (falcon3/forward.hpp)
//     c = 0: FALCON-3A, eq. (4.20), w_t = rho_t / B_t (rho_t N_bar_t)        (falcon3a/forward.hpp)
// with each rule's (gamma_t, w_t) from E_bar_t, B_t and its gate logits. S is stored (d_v, d_k) as every
// rule here (the paper's S is (d_x, d_v): its x_j (v_j - S^T x_j)^T is our (v_j - S x_j) x_j^T). Every
// residual reads the pre-update S_{t-1} (eq. 4.13's "all window residuals are evaluated at the pre-update
// state"); with B = 1 the write is the non-sliding one (nlms_memory.hpp's, one gain for every row).
//
// The window starts empty for each sequence and fills as tokens come (B_t = 1, 2, .., B): the paper's
// I_t = {max(2, t-B+1) .. t} with its boundary no-op at t = 1 (x_1 = phi(k_0) = 0) is this with the
// toolkit's unshifted pairs, whose first token writes (as FALCON-2's). The next-latent alignment
// (x_t = RMSNorm(k_{t-1})) is not part of the step: these rules write the pairs (x_t, v_t) they are given.
//
// The state is S and the window (the pairs in the compute type, as the step computed them): seed 003
// sec. 4.4, "Exact streaming state": S_t alone is not Markov, the next step also reads the window.
// Continuing a sequence from a state (S_t, W_t) equals running it in one go (tests/train/falcon3_test.cpp).
// The reverse pass keeps S_t per step (ScalarDecayMemory's tape) and recomputes the pairs from the
// head's rows of k and v.
#include "core/rules/nlms_memory.hpp"

#include <algorithm>
#include <deque>
#include <utility>
#include <vector>

namespace vla {

template <class C> struct WindowPair {
  Vec<C> x, v;  // (d_k) the write feature RMSNorm(k_j), (d_v) the value v_j
};

// The FIFO of Algorithm 3: push the newest pair, pop the oldest beyond B (line 7).
template <class C> struct SlidingWindow {
  std::deque<WindowPair<C>> pairs;  // oldest first

  void push(const Vec<C>& x, const Vec<C>& v, int B) {
    pairs.push_back({x, v});
    while (static_cast<int>(pairs.size()) > B) pairs.pop_front();
  }
  int size() const { return static_cast<int>(pairs.size()); }
  // E_bar = (1/B_t) sum ||x_j||^2, tr of the window-average covariance (sec. 4.4); 0 for an empty window.
  C energy() const {
    C e(0);
    for (const auto& p : pairs) e += p.x.squaredNorm();
    return pairs.empty() ? e : C(e / C(size()));
  }
};

// One step's coefficients, from the rule: S_t = gamma S_{t-1} + w sum_j (v_j - c S_{t-1} x_j) x_j^T.
template <class C> struct SlidingCoefficients {
  C gamma, w;
};

// S_t from S_{t-1} (d_v, d_k) and the window (the current pair already pushed): eq. (4.13) / (4.20).
template <class C>
Mat<C> sliding_write(const Mat<C>& S_prev, const std::deque<WindowPair<C>>& pairs, const SlidingCoefficients<C>& k, const C& c) {
  Mat<C> U = Mat<C>::Zero(S_prev.rows(), S_prev.cols());  // sum_j (v_j - c S_{t-1} x_j) x_j^T (Algorithm 3, line 10)
  for (const auto& p : pairs) U.noalias() += Vec<C>(p.v - c * (S_prev * p.x)) * p.x.transpose();
  return Mat<C>(k.gamma * S_prev + k.w * U);
}

// S (ScalarDecayMemory's: its S_t tape is all the reverse pass reads) and one window per sequence.
template <class P> struct SlidingMemory : ScalarDecayMemory<P> {
  using storage_t = typename P::storage_t;
  using compute_t = typename P::compute_t;
  using ScalarDecayMemory<P>::memory;  // S: (B, d, d), (d_v, d_k) per sequence

  int B;                                           // the nominal window size (FalconOptions::window)
  std::vector<SlidingWindow<compute_t>> windows;  // one per sequence of the batch

  SlidingMemory(int batch, int d, int window) : ScalarDecayMemory<P>(batch, d), B(window), windows(batch) {}

  // Sequence b's step from the raw projections (d_h each); coefficients(E_bar, B_t) gives the rule's
  // (gamma_t, w_t); c = 1 regression, 0 inner product. Returns o_t. With a record: ||S_t||_F, ||e_t|| of the
  // newest pair, and the map dS_t/dS_{t-1}: S -> gamma S - w c S sum_j x_j x_j^T, which a WriteRecord
  // holds for c = 0 (S -> gamma S) and for B_t = 1 (S -> S (gamma I - x (w x)^T)); a rank-B_t map is carried
  // as its matrix M (WriteRecord::M).
  template <class Coefficients>
  Vec<storage_t> step(int b, const NlmsOptions& opt, const Vec<compute_t>& q, const Vec<compute_t>& k, const Vec<compute_t>& v,
                      const compute_t& c, Coefficients&& coefficients, StepRecord<compute_t>* rec) {
    using C = compute_t;
    const C eps = scalar_cast<C>(opt.eps);
    const Vec<C> x = rms_norm(k, eps);
    auto& win = windows[b];
    win.push(x, v, B);
    const SlidingCoefficients<C> coef = coefficients(win.energy(), win.size());
    const Mat<C> S_prev = cast_matrix<C>(memory.S(b));
    memory.S(b) = cast_matrix<storage_t>(sliding_write<C>(S_prev, win.pairs, coef, c));
    const Vec<storage_t> o = cast_vector<storage_t>(Vec<C>(cast_matrix<C>(memory.S(b)) * rms_norm(q, eps)));
    if (rec) {
      rec->stats[b].S_fro = memory.frobenius_norm(b);
      rec->stats[b].e_norm = to_double(C(Vec<C>(v - c * (S_prev * x)).norm()));
      if (c == C(0)) rec->writes[b] = WriteRecord<C>{x, Vec<C>(), coef.gamma};
      else if (win.size() == 1) rec->writes[b] = WriteRecord<C>{x, Vec<C>(coef.w * x), coef.gamma};
      else {  // S -> S (gamma I - w sum_j x_j x_j^T): a rank-B_t perturbation, carried as M
        Mat<C> M = Mat<C>::Identity(x.size(), x.size()) * coef.gamma;
        for (const auto& p : win.pairs) M.noalias() -= (coef.w * p.x) * p.x.transpose();
        rec->writes[b] = WriteRecord<C>{x, Vec<C>(), C(1), std::move(M)};
      }
    }
    return o;
  }
};

// The adjoint of the step above, carrying dS = dL/dS_t. Step t reads the pairs of tokens t-B_t+1..t, so
// its reverse pass adds into earlier tokens' dx_j, dv_j: those are accumulated here (dX, dV, (n, d)) and
// token t's rows of dk, dv are written once every step that reads it has run. The loop runs t = n-1..0
// (core/model/head.hpp), and a token is read only by its own and later steps, so at step t token t is
// complete. Per step:
//   o_t = S_t qf_t:     dS_t += do_t qf_t^T,  dqf_t = S_t^T do_t
//   the write, per pair j, e_j = v_j - c S_{t-1} x_j:
//                       dv_j += w dS x_j,  dx_j += w dS^T e_j - c S_{t-1}^T dv_j(t),  dS_{t-1} -= c dv_j(t) x_j^T
//                       dgamma = <dS, S_{t-1}>_F,  dw = sum_j e_j^T dS x_j,  dS_{t-1} += gamma dS
//   the coefficients:   the rule's, from dgamma and dw: its gate logits' gradients and dE_bar
//   E_bar:              dx_j += (2 dE_bar / B_t) x_j for every pair of the window
//   token t complete:   dv_t = dV_t,  dk_t = RMSNorm's adjoint at k_t of dX_t
// (the delta write's adjoint, delta_write.hpp, summed over the window with the pre-update S_{t-1}).
template <class T> class SlidingAdjoint {
 protected:
  SlidingAdjoint(const NlmsOptions& opt, int d)
      : opt_(opt), dS(Mat<T>::Zero(d, d)), zero(Mat<T>::Zero(d, d)) {}

  // coefficients(E_bar, B_t) -> SlidingCoefficients as the forward's; backward(dgamma, dw) writes the gate
  // rows of g at t and returns dE_bar.
  template <class Tape, class Coefficients, class Backward>
  void step(int t, const HeadSequence<T>& x, const Tape& tp, const Mat<T>& dO, HeadGrads<T>& g, const T& c,
            Coefficients&& coefficients, Backward&& backward) {
    const T eps = scalar_cast<T>(opt_.eps);
    const int n = static_cast<int>(x.q.rows()), d = static_cast<int>(x.q.cols());
    if (dX.rows() != n) {
      dX = Mat<T>::Zero(n, d);
      dV = Mat<T>::Zero(n, d);
    }
    const Vec<T> q = x.q.row(t).transpose(), dout = dO.row(t).transpose();
    dS.noalias() += dout * rms_norm(q, eps).transpose();
    g.dq.row(t) = rms_norm_backward<T>(q, Vec<T>(tp.S[t].transpose() * dout), eps).transpose();

    // The window of step t, as the forward built it: tokens j0..t.
    const int j0 = std::max(0, t - opt_.falcon.window + 1), Bt = t - j0 + 1;
    std::vector<Vec<T>> xs(Bt);
    T E(0);
    for (int j = j0; j <= t; ++j) {
      xs[j - j0] = rms_norm(Vec<T>(x.k.row(j).transpose()), eps);
      E += xs[j - j0].squaredNorm();
    }
    E /= T(Bt);
    const SlidingCoefficients<T> coef = coefficients(E, Bt);

    const Mat<T>& S_prev = t ? tp.S[t - 1] : zero;
    const T dgamma = dS.cwiseProduct(S_prev).sum();
    T dw(0);
    Mat<T> dS_prev = coef.gamma * dS;
    for (int j = j0; j <= t; ++j) {
      const Vec<T>& xj = xs[j - j0];
      const Vec<T> Sx = S_prev * xj;
      const Vec<T> e = Vec<T>(x.v.row(j).transpose()) - c * Sx;
      const Vec<T> dS_x = dS * xj;
      dw += e.dot(dS_x);
      const Vec<T> de = coef.w * dS_x;
      dV.row(j) += de.transpose();
      dX.row(j) += (coef.w * (dS.transpose() * e) - c * (S_prev.transpose() * de)).transpose();
      dS_prev.noalias() -= (c * de) * xj.transpose();
    }
    dS = std::move(dS_prev);

    const T dE = backward(dgamma, dw);
    for (int j = j0; j <= t; ++j) dX.row(j) += (T(2) * dE / T(Bt) * xs[j - j0]).transpose();

    g.dv.row(t) = dV.row(t);
    g.dk.row(t) = rms_norm_backward<T>(Vec<T>(x.k.row(t).transpose()), Vec<T>(dX.row(t).transpose()), eps).transpose();
  }

  NlmsOptions opt_;
  Mat<T> dS;          // dL/dS_t, carried backwards
  Mat<T> dX, dV;      // (n, d) dL/dx_j, dL/dv_j gathered from the steps that read token j
  const Mat<T> zero;  // S_0
};

}  // namespace vla
