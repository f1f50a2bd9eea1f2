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

#include <cstdint>
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

// The weights of seed `seed` for a single head of width d_head (penalty rank `rank`), in T.
template <class T> MixerWeights<T> protocol_weights(int d_head, std::uint64_t seed, int rank = 1) {
  return random_weights<T>(LayerShape{d_head, d_head, 1, rank}, Needs{.penalty = true, .gate = true}, seed);
}

// The inputs of seed `seed`: (T, d_head), row t-1 is x_t, drawn from seed + 1 in row order.
Mat<double> protocol_inputs(int T, int d_head, std::uint64_t seed);

// trajectories[m][s][t]: the statistics after step t + 1 of mixer p.mixers[m] with seed p.seeds[s]:
// the single-head layer (core/layers/layer_forward.hpp) in `precision` (a name of with_precision) on
// protocol_weights and protocol_inputs. Validates p (and the precision) first.
using ProtocolTrajectories = std::vector<std::vector<std::vector<StepStats>>>;
ProtocolTrajectories protocol_trajectories(const RandomProtocol& p, std::string_view precision);

}  // namespace vla::analysis
