#pragma once
// Everything the command line can say about a mixer: the name and every rule's knobs. Each rule
// reads the fields it has (its from_config, core/rules/<rule>/); the registry turns the name into
// the rule (core/rules/registry.hpp).
#include "core/inverse_penalty_tracker.hpp"

#include <limits>
#include <string>

namespace vla {

// One eps serves every denominator (paper: "eps = 1e-4 for all denominators").
struct MixerConfig {
  std::string mixer = "vla";
  PenaltyOptions penalty;              // VLA: lambda0, eps, delta policy, refresh, rank
  bool renormalise_S = false;          // MemoryMatrixManager renormalisation (default off, 001)
  double renorm_threshold = std::numeric_limits<double>::infinity();
  bool deltanet_gated = true;

  bool is_vla() const { return mixer.rfind("vla", 0) == 0; }
};

}  // namespace vla
