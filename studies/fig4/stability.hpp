#pragma once
// Fig. 4 / Sec. 6.2 of the paper: ||S_t||_F for linear attention, DeltaNet and VLA, and ||A_t||_F for
// VLA, over T random inputs, at inference with random (untrained) weights, in any precision.
// The run is analysis::protocol_trajectories (analysis/random_protocol.hpp), the one the ledger's norm
// analysis (analysis/norms.hpp) makes in double.
#include "analysis/random_protocol.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace vla::studies {

struct StabilityConfig : analysis::RandomProtocol {
  std::string precision = "double";
};

// trajectories[m][s][t]: stats of mixer m, seed s, step t (1-based t stored at index t-1).
struct StabilityResult {
  StabilityConfig config;
  analysis::ProtocolTrajectories trajectories;
  double seconds = 0;
};

StabilityResult run_stability(const StabilityConfig& cfg);
// Writes <dir>/state_norms.csv (t, seed, <mixer>_S_fro..., vla_A_fro) and <dir>/summary.txt; returns
// the summary text.
std::string write_stability(const StabilityResult& r, const std::filesystem::path& dir);
std::string summarise_stability(const StabilityResult& r);

}  // namespace vla::studies
