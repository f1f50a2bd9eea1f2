#pragma once
// The token mixer of one block: projections (as core/layers/mixer_layer.hpp makes them), the memory
// rule run step by step THROUGH THE RULE ITSELF (core/rules, so the forward is the rules' math and
// not a copy of it), and the output projection; its backward beside it.
//   Q, K, V = X W^T + b              (T, H*d_h); head h is columns [h*d_h, (h+1)*d_h)
//   U_raw^h = K^h (W_u^h)^T + b_u^h  (T, d_h) per head, VLA only (Alg. 1 line 10)
//   G = X W_g^T + b_g                (T, H) DeltaNet gate logits
//   O^h_t = rule step (per head, state reset per sequence),  Y = O W_o^T + b_o   (T, d)
#include "core/model/head_tape.hpp"
#include "core/model/linear.hpp"
#include "core/model/params.hpp"
#include "core/model/recurrent_backward.hpp"
#include "core/model/softmax_backward.hpp"

namespace vla::model {

template <class T> struct MixerCache {
  Mat<T> X;                       // (T, d) input (after LN1)
  Mat<T> Q, K, V;                 // (T, H*d_h)
  Mat<T> U;                       // (T, H*d_h) u_raw, VLA only
  Mat<T> G;                       // (T, H) gate logits, DeltaNet only
  Mat<T> O;                       // (T, H*d_h) concatenated head outputs
  std::vector<HeadTape<T>> heads; // (H)
};

template <class Rule> inline constexpr bool is_recurrent = Rule::name != std::string_view("softmax");

template <class T, class Rule>
Mat<T> mixer_forward(const Rule& rule, const Params<T>& p, int l, int H, int dh, const Mat<T>& X, MixerCache<T>& c) {
  const int n = static_cast<int>(X.rows());
  c.X = X;
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
  HeadInputs<T> in;
  Mat<T> out;
  for (int h = 0; h < H; ++h) {
    auto st = rule.init(1, dh);
    auto& tp = c.heads[h];
    if constexpr (is_recurrent<Rule>) {  // one allocation per tape, not a reallocation cascade per step
      tp.S.reserve(n);
      tp.z.reserve(n);
      if constexpr (Rule::needs.penalty) tp.A.reserve(n);
    }
    for (int t = 0; t < n; ++t) {
      in.q = c.Q.block(t, h * dh, 1, dh).transpose();  // (d_h, 1)
      in.k = c.K.block(t, h * dh, 1, dh).transpose();
      in.v = c.V.block(t, h * dh, 1, dh).transpose();
      if constexpr (Rule::needs.penalty) in.u = c.U.block(t, h * dh, 1, dh).transpose();
      if constexpr (Rule::needs.gate) in.gate = Vec<T>::Constant(1, c.G(t, h));
      rule.step(st, in, out, nullptr);
      c.O.block(t, h * dh, 1, dh) = out.col(0).transpose();
      if constexpr (is_recurrent<Rule>) {
        tp.S.push_back(st.memory.S(0));
        tp.z.push_back(st.z[0]);
        if constexpr (Rule::needs.penalty) tp.A.push_back(st.tracker.A(0));
      }
    }
  }
  return linear_forward(c.O, p.at(l, WO), p.at(l, BO));
}

// Returns dL/dX (T, d); adds the weight gradients of block l into g.
template <class T, class Rule>
Mat<T> mixer_backward(const Rule& rule, const MixerConfig& mc, const Params<T>& p, Params<T>& g, int l, int H, int dh,
                      const MixerCache<T>& c, const Mat<T>& dY) {
  const int n = static_cast<int>(dY.rows());
  const Mat<T> dO = linear_backward(dY, c.O, p.at(l, WO), g.at(l, WO), g.at(l, BO));  // (T, H*d_h)
  Mat<T> dQ(n, H * dh), dK(n, H * dh), dV(n, H * dh), dU = Mat<T>::Zero(n, H * dh), dG = Mat<T>::Zero(n, H);
  for (int h = 0; h < H; ++h) {
    Mat<T> dq(n, dh), dk(n, dh), dv(n, dh), du = Mat<T>::Zero(n, dh);
    Vec<T> dg = Vec<T>::Zero(n);
    const Mat<T> q = c.Q.middleCols(h * dh, dh), k = c.K.middleCols(h * dh, dh), v = c.V.middleCols(h * dh, dh);
    const Mat<T> dOh = dO.middleCols(h * dh, dh);
    if constexpr (!is_recurrent<Rule>) {
      softmax_head_backward<T>(q, k, v, dOh, dq, dk, dv);
    } else {
      WriteKind kind = WriteKind::Additive;
      VlaOptions vo;
      if constexpr (Rule::needs.penalty) { kind = WriteKind::Vla; vo = rule.options(); }
      if constexpr (Rule::needs.gate) kind = WriteKind::Delta;
      const Mat<T> ur = Rule::needs.penalty ? Mat<T>(c.U.middleCols(h * dh, dh)) : Mat<T>();
      const Vec<T> gl = Rule::needs.gate ? Vec<T>(c.G.col(h)) : Vec<T>();
      recurrent_head_backward<T>(kind, vo, mc.deltanet_gated, mc.penalty.eps, q, k, v, ur, gl, c.heads[h], dOh, dq, dk, dv, du, dg);
    }
    dQ.middleCols(h * dh, dh) = dq;
    dK.middleCols(h * dh, dh) = dk;
    dV.middleCols(h * dh, dh) = dv;
    if constexpr (Rule::needs.penalty) {
      // u_raw^h = K^h W_u^h^T + b_u^h: back into K^h and W_u^h, b_u^h.
      Mat<T> dWu = g.at(l, WU).middleRows(h * dh, dh), dbu = g.at(l, BU).middleRows(h * dh, dh);
      dK.middleCols(h * dh, dh) += linear_backward(du, Mat<T>(k), Mat<T>(p.at(l, WU).middleRows(h * dh, dh)), dWu, dbu);
      g.at(l, WU).middleRows(h * dh, dh) = dWu;
      g.at(l, BU).middleRows(h * dh, dh) = dbu;
    }
    if constexpr (Rule::needs.gate) dG.col(h) = dg;
  }
  Mat<T> dX = linear_backward(dQ, c.X, p.at(l, WQ), g.at(l, WQ), g.at(l, BQ));
  dX += linear_backward(dK, c.X, p.at(l, WK), g.at(l, WK), g.at(l, BK));
  dX += linear_backward(dV, c.X, p.at(l, WV), g.at(l, WV), g.at(l, BV));
  if constexpr (Rule::needs.gate) dX += linear_backward(dG, c.X, p.at(l, WG), g.at(l, WG), g.at(l, BG));
  return dX;
}

}  // namespace vla::model
