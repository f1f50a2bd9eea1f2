#pragma once
// Fig. 4 / Sec. 6.2 of the paper: ||S_t||_F for linear attention, DeltaNet and VLA, and ||A_t||_F for
// VLA, over T random inputs, at inference with random (untrained) weights.
//
// Protocol (the paper does not state its input distribution; this is ours, docs/studies.md):
//   single head, d_model = d_head (default 32, the paper's d_h); weights W ~ N(0, 1/fan_in) drawn
//   from the seed (core/layers/mixer_layer.hpp random_weights); inputs x_t ~ N(0, I) i.i.d. from
//   seed + 1; the three mixers see the same inputs and the same W_q, W_k, W_v.
#include "core/rules/registry.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace vla::studies {

struct StabilityConfig {
  int T = 1000;
  int d_head = 32;
  std::vector<std::uint64_t> seeds{42, 123, 999};
  std::string precision = "double";
  MixerConfig mixer;  // lambda0, eps, refresh, delta policy for VLA; eps for all
  std::vector<std::string> mixers{"linear", "deltanet", "vla"};
  void validate() const;
};

// trajectories[m][s][t]: stats of mixer m, seed s, step t (1-based t stored at index t-1).
struct StabilityResult {
  StabilityConfig config;
  std::vector<std::vector<std::vector<StepStats>>> trajectories;
  double seconds = 0;
};

StabilityResult run_stability(const StabilityConfig& cfg);
// Writes <dir>/state_norms.csv (t, seed, <mixer>_S_fro..., vla_A_fro) and <dir>/summary.txt; returns
// the summary text.
std::string write_stability(const StabilityResult& r, const std::filesystem::path& dir);
std::string summarise_stability(const StabilityResult& r);

}  // namespace vla::studies
