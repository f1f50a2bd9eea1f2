#pragma once
// The Sec. 6.2 / Fig. 4 random-input protocol, and its one run (protocol_trajectories) for its two
// users: the norm analysis of the claims ledger (analysis/norms.hpp, in double) and the Fig. 4 study
// (studies/fig4, in any precision). The analyses that drive a rule directly see the same protocol
// through analysis/head_stream.hpp. The paper does not state its input distribution; this is ours:
//   single head, d_model = d_head (default 32, the paper's d_h); weights W ~ N(0, 1/fan_in) drawn
//   from the seed (core/layers/mixer_layer.hpp random_weights), every projection any rule needs, so
//   that every mixer sees the same W_q, W_k, W_v; inputs x_t ~ N(0, I) i.i.d. from seed + 1; zero
//   biases; random (untrained) weights, at inference.
#include "core/layers/layer_forward.hpp"
#include "core/layers/mixer_layer.hpp"
#include "core/rules/registry.hpp"

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace vla::analysis {

// What a run of the protocol is: length, width, seeds, the mixers tracked and their settings.
struct RandomProtocol {
  int T = 1000;
  int d_head = 32;
  std::vector<std::uint64_t> seeds{42, 123, 999};
  std::vector<std::string> mixers{"linear", "deltanet", "vla"};
  MixerConfig base;  // lambda0, eps, refresh, delta policy for VLA; eps for all
  // Throws std::invalid_argument naming the command-line option (--T, --d-head, --seeds, --mixers, the
  // penalty's): T, d_head >= 1; seeds and mixers non-empty; no mixer twice; no softmax (it has no
  // fixed-size state whose norm could be tracked).
  void validate() const;
};

// The weights of seed `seed` for a single head of width d_head (penalty rank `rank`), in T, with
// `gate_rows` rows of W_g: row 0 as every rule with a scalar gate reads it; the rows below it for the
// wider gates (Needs::gate_rows: 2, or d_head per-channel logits) from their own generator
// (seed-derived), N(0, 1/d_head) as W_g's, so that every number drawn before is unchanged.
template <class T> MixerWeights<T> protocol_weights(int d_head, std::uint64_t seed, int rank = 1, int gate_rows = 1) {
  MixerWeights<double> w = random_weights<double>(LayerShape{d_head, d_head, 1, rank}, Needs{.penalty = true, .gate = true}, seed);
  if (gate_rows > 1) {
    std::mt19937_64 gen(seed ^ 0x9e3779b97f4a7c15ULL);
    std::normal_distribution<double> n(0.0, 1.0 / std::sqrt(double(d_head)));
    Mat<double> more(gate_rows - 1, d_head);
    for (auto& e : more.reshaped()) e = n(gen);
    w.Wg.conservativeResize(gate_rows, Eigen::NoChange);
    w.Wg.bottomRows(gate_rows - 1) = more;
    if (w.bg.size()) w.bg.conservativeResize(gate_rows);
  }
  return w.template cast<T>();
}

// The inputs of seed `seed`: (T, d_head), row t-1 is x_t, drawn from seed + 1 in row order.
Mat<double> protocol_inputs(int T, int d_head, std::uint64_t seed);

// Penalty directions u_t as Algorithm 1's line 10 makes them, without a layer: (T, d), row t a raw N(0, I)
// vector from `seed` (row order) scaled to unit length / sqrt(d). `skew` stretches the first two raw
// coordinates tenfold, the anisotropic directions a trained W_u produces. For the penalty chain's
// rounding measurements (tests/core/penalty_chain.cpp, notebooks-cpp/penalty_chain_groups.cpp).
Mat<double> penalty_directions(int T, int d, std::uint64_t seed, bool skew = false);

// trajectories[m][s][t]: the statistics after step t + 1 of mixer p.mixers[m] with seed p.seeds[s]:
// the single-head layer (core/layers/layer_forward.hpp) in `precision` (a name of with_precision) on
// protocol_weights and protocol_inputs. Validates p (and the precision) first.
using ProtocolTrajectories = std::vector<std::vector<std::vector<StepStats>>>;
ProtocolTrajectories protocol_trajectories(const RandomProtocol& p, std::string_view precision);

}  // namespace vla::analysis
