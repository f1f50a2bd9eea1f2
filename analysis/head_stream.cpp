#include "analysis/head_stream.hpp"

#include "core/layers/mixer_layer.hpp"

#include <fmt/format.h>

#include <random>

namespace vla::analysis {

void HeadStream::validate() const {
  if (d < 1 || T < 1 || rank < 1)
    throw std::invalid_argument(fmt::format("head stream: d, T and rank must be >= 1 (got {}, {}, {})", d, T, rank));
}

HeadStream random_head_stream(int d_head, int T, std::uint64_t seed, int rank) {
  HeadStream s{d_head, T, rank, {}, {}, {}, {}, {}};
  s.validate();
  const LayerShape shape{d_head, d_head, 1, rank};
  const auto w = random_weights<double>(shape, Needs{.penalty = true, .gate = true}, seed);
  std::mt19937_64 gen(seed + 1);  // the same x_t as studies/fig4 (row t of a (T, d) draw)
  std::normal_distribution<double> n(0.0, 1.0);
  Mat<double> X(d_head, T);  // (d_model, T)
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < d_head; ++i) X(i, t) = n(gen);
  s.q = w.Wq * X;
  s.k = w.Wk * X;
  s.v = w.Wv * X;
  s.u = w.Wu * s.k;
  s.gate = (w.Wg * X).row(0).transpose();
  return s;
}

}  // namespace vla::analysis
