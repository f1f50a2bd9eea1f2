#pragma once
// The token mixer of one block: projections (as core/layers/mixer_layer.hpp makes them), every head
// run through the rule itself (head.hpp: the rule's forward step and its adjoint, core/rules), and the
// output projection; its backward beside it.
//   Q, K, V = X W^T + b              (T, H*d_h); head h is columns [h*d_h, (h+1)*d_h)
//   U_raw^h = K^h (W_u^h)^T + b_u^h  (T, d_h) per head, VLA only (Alg. 1 line 10)
//   G = X W_g^T + b_g                (T, H*g) gate logits, g = Needs::gate_rows(d_h) per head
//   O^h_t = rule step (per head, state reset per sequence; aligned when next_latent, next_latent.hpp)
//   Y = O W_o^T + b_o   (T, d)
#include "core/model/head.hpp"
#include "core/model/linear.hpp"
#include "core/model/params.hpp"

namespace vla::model {

template <class Rule> struct MixerCache {
  using T = typename Rule::storage_t;
  Mat<T> X;                             // (T, d) input (after LN1)
  Mat<T> Q, K, V;                       // (T, H*d_h)
  Mat<T> U;                             // (T, H*d_h) u_raw, rules with needs.penalty
  Mat<T> G;                             // (T, H*g) gate logits, rules with needs.gate
  Mat<T> O;                             // (T, H*d_h) concatenated head outputs
  std::vector<HeadTape<Rule>> heads;    // (H)
  bool next_latent = false;             // the heads ran aligned (next_latent.hpp): the backward does too
};

// Head h's raw inputs (columns [h*d_h, (h+1)*d_h) of the projections).
template <class Rule> HeadSequence<typename Rule::storage_t> head_inputs(const MixerCache<Rule>& c, int h, int dh) {
  HeadSequence<typename Rule::storage_t> x;
  x.q = c.Q.middleCols(h * dh, dh);
  x.k = c.K.middleCols(h * dh, dh);
  x.v = c.V.middleCols(h * dh, dh);
  if constexpr (Rule::needs.penalty) x.u = c.U.middleCols(h * dh, dh);
  if constexpr (Rule::needs.gate) {
    const int g = Rule::needs.gate_rows(dh);
    x.g = c.G.middleCols(h * g, g);
  }
  return x;
}

template <class T, class Rule>
Mat<T> mixer_forward(const Rule& rule, const Params<T>& p, int l, int H, int dh, const Mat<T>& X, MixerCache<Rule>& c,
                     bool next_latent = false) {
  const int n = static_cast<int>(X.rows());
  c.X = X;
  c.next_latent = next_latent;
  c.Q = linear_forward(X, p.at(l, WQ), p.at(l, BQ));
  c.K = linear_forward(X, p.at(l, WK), p.at(l, BK));
  c.V = linear_forward(X, p.at(l, WV), p.at(l, BV));
  if constexpr (Rule::needs.gate) c.G = linear_forward(X, p.at(l, WG), p.at(l, BG));
  if constexpr (Rule::needs.penalty) {
    c.U.resize(n, H * dh);
    for (int h = 0; h < H; ++h)
      c.U.middleCols(h * dh, dh) = linear_forward(Mat<T>(c.K.middleCols(h * dh, dh)), Mat<T>(p.at(l, WU).middleRows(h * dh, dh)),
                                                  Mat<T>(p.at(l, BU).middleRows(h * dh, dh)));
  }
  c.O.resize(n, H * dh);
  c.heads.assign(H, {});
  Mat<T> Oh;  // (T, d_h)
  for (int h = 0; h < H; ++h) {
    head_forward(rule, head_inputs(c, h, dh), Oh, c.heads[h], c.next_latent);
    c.O.middleCols(h * dh, dh) = Oh;
  }
  return linear_forward(c.O, p.at(l, WO), p.at(l, BO));
}

// Returns dL/dX (T, d); adds the weight gradients of block l into g.
template <class T, class Rule>
Mat<T> mixer_backward(const Rule& rule, const Params<T>& p, Params<T>& g, int l, int H, int dh, const MixerCache<Rule>& c,
                      const Mat<T>& dY) {
  const int n = static_cast<int>(dY.rows());
  const Mat<T> dO = linear_backward(dY, c.O, p.at(l, WO), g.at(l, WO), g.at(l, BO));  // (T, H*d_h)
  Mat<T> dQ(n, H * dh), dK(n, H * dh), dV(n, H * dh), dG = Mat<T>::Zero(n, H * Rule::needs.gate_rows(dh));
  for (int h = 0; h < H; ++h) {
    const HeadSequence<T> x = head_inputs(c, h, dh);
    const HeadGrads<T> hg = head_backward(rule, x, c.heads[h], Mat<T>(dO.middleCols(h * dh, dh)), c.next_latent);
    dQ.middleCols(h * dh, dh) = hg.dq;
    dK.middleCols(h * dh, dh) = hg.dk;
    dV.middleCols(h * dh, dh) = hg.dv;
    if constexpr (Rule::needs.penalty) {
      // u_raw^h = K^h W_u^h^T + b_u^h: back into K^h and W_u^h, b_u^h.
      Mat<T> dWu = g.at(l, WU).middleRows(h * dh, dh), dbu = g.at(l, BU).middleRows(h * dh, dh);
      dK.middleCols(h * dh, dh) += linear_backward(hg.du, x.k, Mat<T>(p.at(l, WU).middleRows(h * dh, dh)), dWu, dbu);
      g.at(l, WU).middleRows(h * dh, dh) = dWu;
      g.at(l, BU).middleRows(h * dh, dh) = dbu;
    }
    if constexpr (Rule::needs.gate) dG.middleCols(h * hg.dg.cols(), hg.dg.cols()) = hg.dg;
  }
  Mat<T> dX = linear_backward(dQ, c.X, p.at(l, WQ), g.at(l, WQ), g.at(l, BQ));
  dX += linear_backward(dK, c.X, p.at(l, WK), g.at(l, WK), g.at(l, BK));
  dX += linear_backward(dV, c.X, p.at(l, WV), g.at(l, WV), g.at(l, BV));
  if constexpr (Rule::needs.gate) dX += linear_backward(dG, c.X, p.at(l, WG), g.at(l, WG), g.at(l, BG));
  return dX;
}

}  // namespace vla::model
