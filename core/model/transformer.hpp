#pragma once
// The whole model on one sequence: forward, cross-entropy loss at the positions that carry a target,
// and the backward into a gradient buffer (Tables 3 and 6; VLATransformer in 001).
//   X_0 = E[tokens] + P[0:T]                                   (T, d)
//   block l: X <- X + Mixer(LN1(X));  X <- X + W2 GELU(W1 LN2(X) + b1) + b2     (Pre-LN)
//   logits = LNf(X) E^T                                        (T, V), head tied to E
// Loss: sum over positions with target >= 0 of -log softmax(logits_t)[target_t], times loss_scale
// (the trainer passes 1 / #targets in the batch, so the batch loss is the mean over targets).
#include "core/model/gelu.hpp"
#include "core/model/layernorm.hpp"
#include "core/model/mixer.hpp"

#include <string>
#include <utility>

namespace vla::model {

template <class Rule> struct BlockCache {
  using T = typename Rule::storage_t;
  LayerNormCache<T> ln1, ln2;
  MixerCache<Rule> mix;
  Mat<T> H2, Z1, A1;  // (T, d), (T, F), (T, F)
};

struct SeqResult {
  double loss_sum = 0.0;  // unscaled sum of the per-target cross-entropies
  int targets = 0;
  int correct = 0;        // argmax == target at target positions (exact match per query position)
  std::string nonfinite;  // first activation that went non-finite: "block{l}.{tensor}", empty if none
  std::vector<double> S_fro, A_fro;  // (L) mean over heads of ||S_T||_F, ||A_T||_F at the last token
};

// What sees each block's mixer after its forward: nothing, or a callable on_mixer(l, const MixerCache<Rule>&)
// (the heads' inputs and outputs of block l: analysis/model_head_streams.hpp reads them).
struct NoMixerObserver {
  template <class Cache> void operator()(int, const Cache&) const {}
};

// grads == nullptr: forward only (evaluation). loss_exact, when given, accumulates the CE sum in T.
template <class T, class OnMixer = NoMixerObserver>
SeqResult sequence_forward_backward(const ModelConfig& cfg, const Params<T>& p, const std::vector<int>& tokens,
                                    const std::vector<int>& targets, double loss_scale, Params<T>* grads,
                                    T* loss_exact = nullptr, OnMixer&& on_mixer = {}) {
  return with_rule<Precision<T>>(cfg.mixer, [&](const auto& rule) {
    using Rule = std::decay_t<decltype(rule)>;
    using std::exp;
    using std::log;
    const int n = static_cast<int>(tokens.size()), d = cfg.d_model, L = cfg.layers, H = cfg.heads, dh = cfg.d_head;
    SeqResult res;
    res.S_fro.assign(L, kNotApplicable);
    res.A_fro.assign(L, kNotApplicable);
    std::vector<BlockCache<Rule>> bc(L);
    Mat<T> X(n, d);  // (T, d) residual stream
    for (int t = 0; t < n; ++t) X.row(t) = p.t[TOK].row(tokens[t]) + p.t[POS].row(t);
    auto check = [&](const Mat<T>& m, int l, const char* what) {
      if (res.nonfinite.empty() && !all_finite(m)) res.nonfinite = fmt::format("block{}.{}", l, what);
    };
    for (int l = 0; l < L; ++l) {
      auto& b = bc[l];
      const Mat<T> H1 = layernorm_forward(X, p.at(l, LN1_G), p.at(l, LN1_B), b.ln1);
      X += mixer_forward<T>(rule, p, l, H, dh, H1, b.mix, cfg.mixer.next_latent);
      on_mixer(l, std::as_const(b.mix));
      check(X, l, "mixer_output");
      if constexpr (Rule::recurrent) {  // the norms of the last state, from the tape
        double s = 0, a = 0;
        for (const auto& tp : b.mix.heads) {
          s += to_double(T(tp.S.back().norm()));
          if constexpr (requires { tp.A; }) a += to_double(T(tp.A.back().norm()));
        }
        res.S_fro[l] = s / H;
        if constexpr (requires { b.mix.heads[0].A; }) res.A_fro[l] = a / H;
      }
      b.H2 = layernorm_forward(X, p.at(l, LN2_G), p.at(l, LN2_B), b.ln2);
      b.Z1 = linear_forward(b.H2, p.at(l, W1), p.at(l, B1));
      b.A1 = gelu_forward(b.Z1);
      X += linear_forward(b.A1, p.at(l, W2), p.at(l, B2));
      check(X, l, "ffn_output");
    }
    LayerNormCache<T> lnf;
    const Mat<T> HF = layernorm_forward(X, p.t[p.lnf_g()], p.t[p.lnf_b()], lnf);  // (T, d)
    const Mat<T> logits = HF * p.t[TOK].transpose();                               // (T, V)
    if (res.nonfinite.empty() && !all_finite(logits)) res.nonfinite = "head.logits";
    Mat<T> dlogits = Mat<T>::Zero(n, cfg.vocab);                                    // (T, V)
    for (int t = 0; t < n; ++t) {
      if (targets[t] < 0) continue;
      int arg = 0;
      const T m = logits.row(t).maxCoeff(&arg);
      T sum = T(0);
      for (int j = 0; j < cfg.vocab; ++j) sum += exp(T(logits(t, j) - m));
      const T ce = T(log(sum) + m - logits(t, targets[t]));
      if (loss_exact) *loss_exact += ce;  // in T: the multiprecision gradient check needs all its digits
      res.loss_sum += to_double(ce);
      res.targets += 1;
      res.correct += arg == targets[t];
      for (int j = 0; j < cfg.vocab; ++j) dlogits(t, j) = T(exp(T(logits(t, j) - m)) / sum);
      dlogits(t, targets[t]) -= T(1);
    }
    if (!grads) return res;
    Params<T>& g = *grads;
    dlogits *= T(loss_scale);
    g.t[TOK].noalias() += dlogits.transpose() * HF;  // tied head
    Mat<T> dX = layernorm_backward(Mat<T>(dlogits * p.t[TOK]), p.t[p.lnf_g()], lnf, g.t[p.lnf_g()], g.t[p.lnf_b()]);
    for (int l = L - 1; l >= 0; --l) {
      auto& b = bc[l];
      const Mat<T> dA1 = linear_backward(dX, b.A1, p.at(l, W2), g.at(l, W2), g.at(l, B2));
      const Mat<T> dH2 = linear_backward(gelu_backward(dA1, b.Z1), b.H2, p.at(l, W1), g.at(l, W1), g.at(l, B1));
      dX += layernorm_backward(dH2, p.at(l, LN2_G), b.ln2, g.at(l, LN2_G), g.at(l, LN2_B));
      const Mat<T> dH1 = mixer_backward<T>(rule, p, g, l, H, dh, b.mix, dX);
      dX += layernorm_backward(dH1, p.at(l, LN1_G), b.ln1, g.at(l, LN1_G), g.at(l, LN1_B));
    }
    for (int t = 0; t < n; ++t) {
      g.t[TOK].row(tokens[t]) += dX.row(t);
      g.t[POS].row(t) += dX.row(t);
    }
    return res;
  });
}

}  // namespace vla::model
