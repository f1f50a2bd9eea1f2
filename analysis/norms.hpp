#pragma once
// Analysis 2: ||S_t||_F (every rule) and ||A_t||_F (VLA) along the Sec. 6.2 random-input protocol,
// with Proposition 1's bound (eq. 13) ||S_t||_F <= ||S_0||_F + sum_{s<=t} ||e_s|| checked at every t
// (S_0 = 0; e_norm from StepStats). Double precision: the run is protocol_trajectories
// (analysis/random_protocol.hpp), the same as `vla stability --precision double` (studies/fig4).
#include "analysis/random_protocol.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace vla::analysis {

// The Sec. 6.2 protocol's settings (analysis/random_protocol.hpp), run in double.
struct NormConfig : RandomProtocol {};

struct NormSeries {
  std::string mixer;
  std::uint64_t seed = 0;
  std::vector<double> S, A, bound;   // (T) ||S_t||_F, ||A_t||_F (NaN without A), the eq. 13 bound
  double max_bound_excess = 0;       // max_t (||S_t||_F - bound_t) / bound_t; > 0 means eq. 13 is violated
};

struct NormResult {
  NormConfig config;
  std::vector<NormSeries> series;    // mixer-major, then seed
  // Mean over seeds at step t (1-based) for a mixer; field 'S' or 'A'.
  double mean_at(const std::string& mixer, int t, char field) const;
  double max_excess(const std::string& mixer) const;
};

NormResult run_norms(const NormConfig& cfg);
std::string write_norms(const NormResult& r, const std::filesystem::path& dir);

}  // namespace vla::analysis
