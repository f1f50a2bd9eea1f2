#pragma once
// A token mixer layer: the projections of eq. (2)/(3)/(9) around any memory rule, H heads of d_head.
//
//   q_t = W_q x_t + b_q,  k_t = W_k x_t + b_k,  v_t = W_v x_t + b_v      (H*d_head rows; head h is
//                                                                        rows [h*d_head, (h+1)*d_head))
//   u_t^h = W_u^h k_t^h + b_u^h     (VLA only; rank*d_head rows per head, W_u^h: rank*d_head x d_head)
//   g_t^h = w_g^h . x_t + b_g^h     (DeltaNet only: the gate logit, beta = sigmoid(g))
//   y_t = W_o [o_t^1; ...; o_t^H] + b_o                                  (d_model)
//
// Each head has its own state, reset at the start of every forward (every new sequence). Every step
// is checked for a non-finite value (core/rules/non_finite.hpp): the first throws NonFiniteError.
// With next_latent (MixerConfig::next_latent, core/model/next_latent.hpp) the step at token t gets the
// key (and u_raw) of token t - 1, and token 1 runs no step: its head outputs are 0 and its trace entries
// stay NaN.
// Shapes: a batch is B matrices of (T, d_model), one per sequence (row t = x_t).
#include "core/layers/mixer_weights.hpp"
#include "core/rules/memory_rule.hpp"
#include "core/rules/non_finite.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <vector>

namespace vla {

// Per-step statistics of a forward: stats[(t * B + b) * H + h].
struct LayerTrace {
  int T = 0, B = 0, H = 0;
  std::vector<StepStats> stats;
  const StepStats& at(int t, int b, int h) const { return stats[(std::size_t(t) * B + b) * H + h]; }
};

template <class Rule> class MixerLayer {
 public:
  using storage_t = typename Rule::storage_t;
  using compute_t = typename Rule::compute_t;

  MixerLayer(LayerShape shape, Rule rule, MixerWeights<storage_t> w, bool next_latent = false)
      : shape_(shape), rule_(std::move(rule)), w_(std::move(w)), next_latent_(next_latent) {
    validate();
  }

  const LayerShape& shape() const { return shape_; }
  const Rule& rule() const { return rule_; }
  const MixerWeights<storage_t>& weights() const { return w_; }

  // Forward over a batch of sequences; X[b] is (T, d_model). Returns Y with the same shapes.
  std::vector<Mat<storage_t>> forward(const std::vector<Mat<storage_t>>& X, LayerTrace* trace = nullptr) const {
    using C = compute_t;
    const int B = static_cast<int>(X.size());
    if (B == 0) throw std::invalid_argument("input: the batch is empty");
    const int T = static_cast<int>(X[0].rows());
    for (int b = 0; b < B; ++b) {
      if (X[b].rows() != T || X[b].cols() != shape_.d_model)
        throw std::invalid_argument(fmt::format("input: sequence {} has shape ({}, {}), expected ({}, {}) = (T, d_model)",
                                                b, X[b].rows(), X[b].cols(), T, shape_.d_model));
      if (!all_finite(X[b])) throw std::invalid_argument(fmt::format("input: sequence {} contains a non-finite value", b));
    }
    const auto wc = w_.template cast<C>();  // weights in the compute type, once per forward
    const int H = shape_.heads, dh = shape_.d_head, r = shape_.rank, gr = Rule::needs.gate_rows(dh);
    std::vector<typename Rule::State> states;
    for (int h = 0; h < H; ++h) states.push_back(rule_.init(B, dh));
    std::vector<Mat<storage_t>> Y(B, Mat<storage_t>(T, shape_.d_model));
    if (trace) { trace->T = T; trace->B = B; trace->H = H; trace->stats.assign(std::size_t(T) * B * H, {}); }

    HeadInputs<storage_t> in;
    Mat<storage_t> out;
    StepRecord<C> rec;
    Mat<C> O(H * dh, B);  // concatenated head outputs for this token
    Mat<C> K_prev;        // (H*d_h, B) the previous token's keys, the ones written when next_latent
    for (int t = 0; t < T; ++t) {
      Mat<C> Xt(shape_.d_model, B);
      for (int b = 0; b < B; ++b) Xt.col(b) = cast_vector<C>(Vec<storage_t>(X[b].row(t).transpose()));
      const Mat<C> Q = affine(wc.Wq, wc.bq, Xt), V = affine(wc.Wv, wc.bv, Xt);
      Mat<C> K = affine(wc.Wk, wc.bk, Xt);
      if (next_latent_) std::swap(K, K_prev);  // K: token t - 1's keys; K_prev: token t's, for the next step
      Mat<C> G;  // (H*g, B)
      if (Rule::needs.gate) G = affine(wc.Wg, wc.bg, Xt);
      if (next_latent_ && t == 0) O.setZero();  // no write at token 1: every head reads S_0 = 0
      for (int h = 0; h < H && !(next_latent_ && t == 0); ++h) {
        in.q = cast_matrix<storage_t>(Mat<C>(Q.middleRows(h * dh, dh)));
        in.k = cast_matrix<storage_t>(Mat<C>(K.middleRows(h * dh, dh)));
        in.v = cast_matrix<storage_t>(Mat<C>(V.middleRows(h * dh, dh)));
        if (Rule::needs.penalty) {
          // u_raw = W_u^h k_raw^h with k_raw as stored (rounded), the same k the rule sees.
          const Mat<C> Wu_h = wc.Wu.middleRows(h * r * dh, r * dh);
          Mat<C> U = Wu_h * cast_matrix<C>(in.k);
          if (wc.bu.size()) U.colwise() += wc.bu.segment(h * r * dh, r * dh);
          in.u = cast_matrix<storage_t>(U);
        }
        if (Rule::needs.gate) in.gate = cast_matrix<storage_t>(Mat<C>(G.middleRows(h * gr, gr)));  // (g, B)
        rule_.step(states[h], in, out, trace ? &rec : nullptr);
        for (int b = 0; b < B; ++b)
          if (const char* what = first_non_finite(states[h], b, in, out)) throw NonFiniteError(t + 1, b, h, what, precision_name());
        O.middleRows(h * dh, dh) = cast_matrix<C>(out);
        if (trace)
          for (int b = 0; b < B; ++b) trace->stats[(std::size_t(t) * B + b) * H + h] = rec.stats[b];
      }
      const Mat<C> Yt = affine(wc.Wo, wc.bo, O);
      for (int b = 0; b < B; ++b) {
        Y[b].row(t) = cast_vector<storage_t>(Vec<C>(Yt.col(b))).transpose();
        if (!all_finite(Y[b].row(t))) throw NonFiniteError(t + 1, b, -1, "y_t = W_o o_t + b_o", precision_name());
      }
    }
    return Y;
  }

 private:
  static constexpr std::string_view precision_name() { return Precision<storage_t, compute_t>::name(); }

  static Mat<compute_t> affine(const Mat<compute_t>& W, const Vec<compute_t>& bias, const Mat<compute_t>& X) {
    Mat<compute_t> Y = W * X;
    if (bias.size()) Y.colwise() += bias;
    return Y;
  }

  void validate() const {
    const auto& s = shape_;
    if (s.d_model < 1 || s.d_head < 1 || s.heads < 1 || s.rank < 1)
      throw std::invalid_argument(fmt::format("layer shape: d_model, d_head, heads and rank must be >= 1 (got {}, {}, {}, {})",
                                              s.d_model, s.d_head, s.heads, s.rank));
    const int hd = s.heads * s.d_head;
    auto need = [](const char* name, const auto& m, long rows, long cols) {
      if (m.rows() != rows || m.cols() != cols)
        throw std::invalid_argument(fmt::format("{}: shape ({}, {}), expected ({}, {})", name, m.rows(), m.cols(), rows, cols));
      if (!all_finite(m)) throw std::invalid_argument(fmt::format("{}: contains a non-finite value", name));
    };
    auto need_bias = [](const char* name, const auto& v, long n) {
      if (v.size() != 0 && v.size() != n)
        throw std::invalid_argument(fmt::format("{}: length {}, expected {} (or absent)", name, v.size(), n));
      if (v.size() && !all_finite(v)) throw std::invalid_argument(fmt::format("{}: contains a non-finite value", name));
    };
    need("Wq", w_.Wq, hd, s.d_model);
    need("Wk", w_.Wk, hd, s.d_model);
    need("Wv", w_.Wv, hd, s.d_model);
    need("Wo", w_.Wo, s.d_model, hd);
    need_bias("bq", w_.bq, hd);
    need_bias("bk", w_.bk, hd);
    need_bias("bv", w_.bv, hd);
    need_bias("bo", w_.bo, s.d_model);
    if (Rule::needs.penalty) {
      need("Wu", w_.Wu, s.heads * s.rank * s.d_head, s.d_head);
      need_bias("bu", w_.bu, s.heads * s.rank * s.d_head);
    }
    if (Rule::needs.gate) {
      need("Wg", w_.Wg, s.heads * Rule::needs.gate_rows(s.d_head), s.d_model);
      need_bias("bg", w_.bg, s.heads * Rule::needs.gate_rows(s.d_head));
    }
  }

  LayerShape shape_;
  Rule rule_;
  MixerWeights<storage_t> w_;
  bool next_latent_ = false;
};

}  // namespace vla
