#pragma once
// `vla report`: <out>/REPORT.md, everything the toolkit measured about the paper in one document: a
// summary written from the computed verdicts (which of the paper's claims hold, at its own recipe, only
// at another, or not at all; which results come from --quick smoke runs), the claims ledger, and every
// study's section (its plots inline, links rewritten to the study's folder). Studies that have not run
// are listed as such. Nothing in it is written by hand.
#include "analysis/claims.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace vla::studies {

// The report for the ledger results `claims` (run at `cfg`) and the study folders under cfg.out_dir.
std::string report_markdown(const analysis::ClaimsConfig& cfg, const std::vector<analysis::ClaimResult>& claims);

}  // namespace vla::studies
