#pragma once
// The weights of a mixer layer (core/layers/mixer_layer.hpp) and their random initialisation, drawn
// once for every user: the layer (random_weights) and the model's blocks (core/model/params.hpp
// init_params, which stores the same tensors in its flat list).
#include "core/rules/memory_rule.hpp"

#include <cmath>
#include <cstdint>
#include <random>

namespace vla {

// Weights of a mixer layer in one scalar type. Empty matrices/vectors mean "not used" (W_u for
// rules without penalty) or "zero" (biases).
template <class T> struct MixerWeights {
  Mat<T> Wq, Wk, Wv;  // (H*d_head, d_model)
  Mat<T> Wu;          // (H*rank*d_head, d_head): head h uses rows [h*rank*d_head, (h+1)*rank*d_head)
  Mat<T> Wg;          // (H*g, d_model) gate weights, g = Needs::gate_rows(d_head): head h uses rows [h*g, (h+1)*g)
  Mat<T> Wo;          // (d_model, H*d_head)
  Vec<T> bq, bk, bv, bu, bg, bo;

  template <class To> MixerWeights<To> cast() const {
    auto m = [](const Mat<T>& x) { return cast_matrix<To>(x); };
    auto v = [](const Vec<T>& x) { return cast_vector<To>(x); };
    return {m(Wq), m(Wk), m(Wv), m(Wu), m(Wg), m(Wo), v(bq), v(bk), v(bv), v(bu), v(bg), v(bo)};
  }
};

struct LayerShape {
  int d_model = 0;
  int d_head = 0;
  int heads = 1;
  int rank = 1;
};

// A (rows, cols) matrix of N(0, sd^2) draws from gen, column by column (a fresh distribution per
// matrix, so each matrix's draws depend only on the generator's state).
inline Mat<double> gaussian_matrix(std::mt19937_64& gen, int rows, int cols, double sd) {
  std::normal_distribution<double> n(0.0, sd);
  Mat<double> m(rows, cols);
  for (int j = 0; j < cols; ++j)
    for (int i = 0; i < rows; ++i) m(i, j) = n(gen);
  return m;
}

// N(0, 1/fan_in) for every weight a rule with `needs` reads, drawn from gen in the order Wq, Wk, Wv,
// (Wu), (Wg), Wo; zero (empty) biases.
inline MixerWeights<double> draw_mixer_weights(std::mt19937_64& gen, const LayerShape& s, Needs needs) {
  auto gauss = [&](int rows, int cols, int fan_in) { return gaussian_matrix(gen, rows, cols, 1.0 / std::sqrt(double(fan_in))); };
  const int hd = s.heads * s.d_head;
  MixerWeights<double> w;
  w.Wq = gauss(hd, s.d_model, s.d_model);
  w.Wk = gauss(hd, s.d_model, s.d_model);
  w.Wv = gauss(hd, s.d_model, s.d_model);
  if (needs.penalty) w.Wu = gauss(s.heads * s.rank * s.d_head, s.d_head, s.d_head);
  if (needs.gate) w.Wg = gauss(s.heads * needs.gate_rows(s.d_head), s.d_model, s.d_model);
  w.Wo = gauss(s.d_model, hd, hd);
  return w;
}

// Random initialisation, deterministic for a seed (drawn in double, then rounded to T).
template <class T> MixerWeights<T> random_weights(const LayerShape& s, Needs needs, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  return draw_mixer_weights(gen, s, needs).template cast<T>();
}

}  // namespace vla
