#include "analysis/head_stream.hpp"

#include "analysis/random_protocol.hpp"

#include <fmt/format.h>

namespace vla::analysis {

void HeadStream::validate() const {
  if (d < 1 || T < 1 || rank < 1)
    throw std::invalid_argument(fmt::format("head stream: d, T and rank must be >= 1 (got {}, {}, {})", d, T, rank));
}

HeadStream random_head_stream(int d_head, int T, std::uint64_t seed, int rank) {
  HeadStream s{d_head, T, rank, {}, {}, {}, {}, {}};
  s.validate();
  const auto w = protocol_weights<double>(d_head, seed, rank);
  const Mat<double> X = protocol_inputs(T, d_head, seed).transpose();  // (d_model, T)
  s.q = w.Wq * X;
  s.k = w.Wk * X;
  s.v = w.Wv * X;
  s.u = w.Wu * s.k;
  s.gate = w.Wg * X;  // (1, T)
  return s;
}

}  // namespace vla::analysis
