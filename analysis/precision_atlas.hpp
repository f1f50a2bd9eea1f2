#pragma once
// Analysis 4: the precision failure atlas. Each rule, under each stability policy, in each format,
// against the same rule and policy in mp50 on the same head stream (Sec. 6.2 protocol):
//   relative error of o_t and of S_t versus t, the first non-finite step, the first step where the
//   stored A_t stops being positive definite, and how often the delta guard fired.
// Policies (VLA only; other rules run "default"):
//   clamp        Alg. 1: delta < eps -> divide by eps (the default)
//   skip         spec 001: |delta| < eps -> skip the update, A += eps I
//   no-refresh   no periodic A += eta I
//   renorm       MemoryMatrixManager renormalises ||S||_F to renorm_threshold when above it
#include "analysis/atlas_trajectory.hpp"

#include <filesystem>

namespace vla::analysis {

struct AtlasConfig {
  int d_head = 16;
  int T = 300;
  std::uint64_t seed = 42;
  std::vector<std::string> mixers{"linear", "deltanet", "vla"};
  // Which of AtlasPrecisions run against the reference (which always runs), in the report's order.
  std::vector<std::string> precisions{"half", "bfloat16", "float", "double", "half+float", "bfloat16+float"};
  std::vector<std::string> policies{"clamp", "skip", "no-refresh", "renorm"};
  double renorm_threshold = 10.0;
  MixerConfig base;
  void validate() const;
};

MixerConfig apply_policy(MixerConfig cfg, const std::string& policy, double renorm_threshold);

struct AtlasCell {
  std::string mixer, policy, precision;
  std::vector<double> out_err, S_err;  // (T) relative errors vs mp50 (inf once non-finite)
  int first_nonfinite = 0, first_A_not_pd = 0, guard_fires = 0, ref_guard_fires = 0;
  double min_A_eig = 0;                // min over t of lambda_min(A_t) (NaN without A)
  std::string first_nonfinite_what;    // the quantity that was first non-finite (core/rules/non_finite.hpp)
  double final_out_err() const { return out_err.back(); }
  double max_out_err() const;
};

std::vector<AtlasCell> run_atlas(const AtlasConfig& cfg);

// run_atlas in independent units, to split over processes (core/parallel/group.hpp): one per (mixer,
// policy) that runs, each its mp50 reference and every precision against it; run_atlas is the units'
// cells in unit order. atlas_units validates the config.
struct AtlasUnit {
  std::string mixer, policy;
};
std::vector<AtlasUnit> atlas_units(const AtlasConfig& cfg);
std::vector<AtlasCell> run_atlas_unit(const AtlasConfig& cfg, const AtlasUnit& u);
// A unit's cells as bytes and back, bit for bit (core/parallel/bytes.hpp).
std::string encode_cells(const std::vector<AtlasCell>& cells);
std::vector<AtlasCell> decode_cells(const std::string& bytes);
std::string write_atlas(const AtlasConfig& cfg, const std::vector<AtlasCell>& cells, const std::filesystem::path& dir);

}  // namespace vla::analysis
