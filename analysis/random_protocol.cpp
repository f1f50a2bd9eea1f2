#include "analysis/random_protocol.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <random>
#include <set>
#include <stdexcept>

namespace vla::analysis {

void RandomProtocol::validate() const {
  if (T < 1) throw std::invalid_argument(fmt::format("--T: must be >= 1, got {}", T));
  if (d_head < 1) throw std::invalid_argument(fmt::format("--d-head: must be >= 1, got {}", d_head));
  if (seeds.empty()) throw std::invalid_argument("--seeds: at least one seed is needed");
  if (mixers.empty()) throw std::invalid_argument("--mixers: at least one mixer is needed");
  base.penalty.validate();
  std::set<std::string> seen;
  for (const auto& m : mixers) {
    if (m == "softmax") throw std::invalid_argument("--mixers: softmax has no fixed-size state to track");
    if (!seen.insert(m).second) throw std::invalid_argument(fmt::format("--mixers: '{}' given twice", m));
  }
}

Mat<double> protocol_inputs(int T, int d_head, std::uint64_t seed) {
  std::mt19937_64 gen(seed + 1);
  std::normal_distribution<double> n(0.0, 1.0);
  Mat<double> X(T, d_head);
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < d_head; ++i) X(t, i) = n(gen);
  return X;
}

Mat<double> penalty_directions(int T, int d, std::uint64_t seed, bool skew) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> n;
  Mat<double> U(T, d);
  for (int t = 0; t < T; ++t) {
    Vec<double> x(d);
    for (int i = 0; i < d; ++i) x(i) = n(gen) * (skew && i < 2 ? 10.0 : 1.0);
    U.row(t) = (x / x.norm() / std::sqrt(double(d))).transpose();  // line 10
  }
  return U;
}

ProtocolTrajectories protocol_trajectories(const RandomProtocol& p, std::string_view precision) {
  p.validate();
  with_precision(precision, [](auto) {});  // an unknown name fails before any run
  ProtocolTrajectories out;
  for (const auto& m : p.mixers) {
    MixerConfig mc = p.base;
    mc.mixer = m;
    const LayerShape shape{p.d_head, p.d_head, 1, mc.penalty.rank};
    const int gate_rows = std::max(1, rule_needs(mc).gate_rows(p.d_head));  // per-channel rules: d_head rows
    auto& per_seed = out.emplace_back();
    for (auto seed : p.seeds)
      per_seed.push_back(layer_forward(precision, mc, shape, protocol_weights<double>(p.d_head, seed, mc.penalty.rank, gate_rows),
                                       protocol_inputs(p.T, p.d_head, seed))
                             .trace);  // B = H = 1: one entry per step
  }
  return out;
}

}  // namespace vla::analysis
