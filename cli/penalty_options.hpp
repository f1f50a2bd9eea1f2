#pragma once
// The options of the inverse penalty (core/inverse_penalty_tracker.hpp PenaltyOptions) that every
// command running the rules on the protocol's inputs shares: `vla stability`, `vla jacobian`,
// `vla recovery`, `vla precision-atlas`. Defaults are Algorithm 1's (PenaltyOptions').
#include "core/inverse_penalty_tracker.hpp"

#include <CLI/CLI.hpp>

namespace vla::cli {

inline void add_penalty_options(CLI::App& app, PenaltyOptions& p) {
  app.add_option("--lambda0", p.lambda0, "VLA: A_0 = I / lambda0")->capture_default_str();
  app.add_option("--eps", p.eps, "denominator floor (all mixers)")->capture_default_str();
  app.add_option("--refresh-period", p.refresh_period, "VLA: refresh every K steps (0 = off)")->capture_default_str();
}

}  // namespace vla::cli
