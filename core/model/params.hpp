#pragma once
// The model's parameters as one flat list of named tensors, so that the optimiser, the gradient
// check, the checkpoint and the gradient buffers all walk the same list. Vectors are (n, 1) matrices.
// Tensors a mixer does not use (W_u without VLA, w_g without DeltaNet) are (0, 0).
#include "core/layers/mixer_weights.hpp"
#include "core/model/config.hpp"
#include "core/scalar.hpp"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace vla::model {

// Offsets of one block's tensors; block l starts at 2 + l * kPerBlock.
enum BlockTensor : int {
  LN1_G, LN1_B, WQ, BQ, WK, BK, WV, BV, WU, BU, WG, BG, WO, BO, LN2_G, LN2_B, W1, B1, W2, B2, kPerBlock
};
inline constexpr const char* kBlockNames[kPerBlock] = {"ln1.g", "ln1.b", "Wq", "bq", "Wk", "bk", "Wv", "bv", "Wu", "bu",
                                                       "Wg", "bg", "Wo", "bo", "ln2.g", "ln2.b", "W1", "b1", "W2", "b2"};
inline constexpr int TOK = 0, POS = 1;

template <class T> struct Params {
  std::vector<Mat<T>> t;
  std::vector<std::string> names;

  int block(int l, BlockTensor k) const { return 2 + l * kPerBlock + k; }
  int lnf_g() const { return static_cast<int>(t.size()) - 2; }
  int lnf_b() const { return static_cast<int>(t.size()) - 1; }
  Mat<T>& at(int l, BlockTensor k) { return t[block(l, k)]; }
  const Mat<T>& at(int l, BlockTensor k) const { return t[block(l, k)]; }

  // Same layout, all zero (a gradient buffer).
  Params zeros_like() const {
    Params z{t, names};
    for (auto& m : z.t) m.setZero();
    return z;
  }
  std::size_t count() const {
    std::size_t n = 0;
    for (const auto& m : t) n += m.size();
    return n;
  }
  template <class To> Params<To> cast() const {
    Params<To> o;
    o.names = names;
    for (const auto& m : t) o.t.push_back(cast_matrix<To>(m));
    return o;
  }
};

// Deterministic initialisation from a seed (drawn in double, then rounded to T, so every scalar type
// starts from the same point): embeddings N(0, 0.02^2) (GPT-2), the mixer's weights as a layer's
// (core/layers/mixer_weights.hpp, draw_mixer_weights), the FFN N(0, 1/fan_in), LayerNorm gains 1,
// biases 0.
template <class T> Params<T> init_params(const ModelConfig& c, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  auto gauss = [&](int rows, int cols, double sd) { return cast_matrix<T>(gaussian_matrix(gen, rows, cols, sd)); };
  auto zeros = [](int n) { return Mat<T>(Mat<T>::Zero(n, 1)); };
  auto ones = [](int n) { return Mat<T>(Mat<T>::Ones(n, 1)); };
  auto used = [](const Mat<double>& w) { return w.size() ? cast_matrix<T>(w) : Mat<T>(); };  // (0, 0): a tensor the rule does not read
  auto bias = [&](const Mat<double>& w, int n) { return w.size() ? zeros(n) : Mat<T>(); };
  const int d = c.d_model, hd = c.heads * c.d_head, dh = c.d_head;
  const Needs needs = rule_needs(c.mixer);
  Params<T> p;
  auto add = [&](std::string n, Mat<T> m) { p.names.push_back(std::move(n)); p.t.push_back(std::move(m)); };
  add("tok_emb", gauss(c.vocab, d, 0.02));    // (V, d), also the output head (tied)
  add("pos_emb", gauss(c.max_len, d, 0.02));  // (max_len, d)
  for (int l = 0; l < c.layers; ++l) {
    const std::string b = fmt::format("block{}.", l);
    const MixerWeights<double> w = draw_mixer_weights(gen, LayerShape{d, dh, c.heads, 1}, needs);
    add(b + "ln1.g", ones(d)); add(b + "ln1.b", zeros(d));
    add(b + "Wq", used(w.Wq)); add(b + "bq", zeros(hd));  // (H*dh, d), (H*dh)
    add(b + "Wk", used(w.Wk)); add(b + "bk", zeros(hd));
    add(b + "Wv", used(w.Wv)); add(b + "bv", zeros(hd));
    add(b + "Wu", used(w.Wu)); add(b + "bu", bias(w.Wu, c.heads * dh));  // (H*dh, dh) per-head blocks, (H*dh)
    add(b + "Wg", used(w.Wg)); add(b + "bg", bias(w.Wg, c.heads * needs.gate_rows(dh)));  // (H*g, d), (H*g)
    add(b + "Wo", used(w.Wo)); add(b + "bo", zeros(d));  // (d, H*dh), (d)
    add(b + "ln2.g", ones(d)); add(b + "ln2.b", zeros(d));
    add(b + "W1", gauss(c.ffn, d, 1 / std::sqrt(double(d)))); add(b + "b1", zeros(c.ffn));       // (F, d), (F)
    add(b + "W2", gauss(d, c.ffn, 1 / std::sqrt(double(c.ffn)))); add(b + "b2", zeros(d));       // (d, F), (d)
  }
  add("lnf.g", ones(d)); add("lnf.b", zeros(d));
  return p;
}

// Multiply-adds per token of the model's dense projections in one forward pass: each weight entry of
// init_params's matrices multiplies once per token (Wq, Wk, Wv, Wo, W_u's per-head blocks, the gate, W1,
// W2; the token embedding once, as the tied output head; the positional embedding is a lookup). The
// backward does twice as many (dX and dW). What a floor on the training step's GEMM time is counted from.
inline long long dense_macs_per_token(const ModelConfig& c) {
  const long long d = c.d_model, hd = static_cast<long long>(c.heads) * c.d_head, dh = c.d_head;
  const Needs needs = rule_needs(c.mixer);
  long long block = 4 * hd * d + 2LL * c.ffn * d;  // Wq, Wk, Wv (hd, d), Wo (d, hd), W1 (F, d), W2 (d, F)
  if (needs.penalty) block += hd * dh;                                      // Wu (H dh, dh), rank 1
  if (needs.gate) block += static_cast<long long>(c.heads) * needs.gate_rows(c.d_head) * d;  // Wg (H g, d)
  return c.layers * block + static_cast<long long>(c.vocab) * d;
}

// Block l's mixer weights as the layer's container (core/layers/mixer_weights.hpp), copied out of
// the flat list: the same tensors MixerLayer runs on.
template <class T> MixerWeights<T> block_mixer_weights(const Params<T>& p, int l) {
  MixerWeights<T> w;
  w.Wq = p.at(l, WQ); w.Wk = p.at(l, WK); w.Wv = p.at(l, WV); w.Wu = p.at(l, WU); w.Wg = p.at(l, WG); w.Wo = p.at(l, WO);
  w.bq = p.at(l, BQ).col(0); w.bk = p.at(l, BK).col(0); w.bv = p.at(l, BV).col(0); w.bo = p.at(l, BO).col(0);
  if (p.at(l, BU).size()) w.bu = p.at(l, BU).col(0);
  if (p.at(l, BG).size()) w.bg = p.at(l, BG).col(0);
  return w;
}

}  // namespace vla::model
