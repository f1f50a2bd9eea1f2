#include "analysis/head_stream.hpp"

#include "analysis/random_protocol.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace vla::analysis {

namespace {
void check_sizes(int d, int T, int rank) {
  if (d < 1 || T < 1 || rank < 1)
    throw std::invalid_argument(fmt::format("head stream: d, T and rank must be >= 1 (got {}, {}, {})", d, T, rank));
}
}  // namespace

void HeadStream::validate() const {
  check_sizes(d, T, rank);
  // token_inputs reads column t of every matrix: a matrix of another shape would be read out of bounds.
  const auto shape = [&](const Mat<double>& m, Eigen::Index rows, const char* name) {
    if (m.cols() != T || (rows > 0 ? m.rows() != rows : m.rows() < 1))
      throw std::invalid_argument(fmt::format("head stream: {} must be ({}, {}) (one column per token), got ({}, {})", name,
                                              rows > 0 ? fmt::format("{}", rows) : std::string(">= 1"), T, m.rows(), m.cols()));
  };
  shape(q, d, "q");
  shape(k, d, "k");
  shape(v, d, "v");
  shape(u, Eigen::Index(rank) * d, "u");
  shape(gate, 0, "gate");
}

HeadStream random_head_stream(int d_head, int T, std::uint64_t seed, int rank) {
  check_sizes(d_head, T, rank);
  HeadStream s{d_head, T, rank, {}, {}, {}, {}, {}};
  const auto w = protocol_weights<double>(d_head, seed, rank, std::max(d_head, 2));  // every gate width a rule reads
  const Mat<double> X = protocol_inputs(T, d_head, seed).transpose();  // (d_model, T)
  s.q = w.Wq * X;
  s.k = w.Wk * X;
  s.v = w.Wv * X;
  s.u = w.Wu * s.k;
  s.gate = w.Wg * X;  // (max(d, 2), T): row 0 the scalar gate, the rows below for the wider gates
  s.validate();
  return s;
}

}  // namespace vla::analysis
