#pragma once
// What the claims' measurements share: each analysis runs once (lazily, at the settings the ledger
// uses), writes its CSVs and plots under <out_dir>/claims/, and is reused by every claim that needs it.
#include "analysis/claims.hpp"
#include "analysis/jacobian.hpp"
#include "analysis/norms.hpp"
#include "analysis/precision_atlas.hpp"
#include "analysis/recovery.hpp"

#include <optional>

namespace vla::analysis {

struct ClaimsContext {
  explicit ClaimsContext(const ClaimsConfig& c) : cfg(c), dir(c.out_dir / "claims") {}
  const ClaimsConfig& cfg;
  std::filesystem::path dir;

  // Settings the ledger runs each analysis at (quick / full), stated in the measured text.
  NormConfig norm_config() const;
  JacobianConfig jacobian_config() const;
  RecoveryConfig recovery_config() const;
  AtlasConfig atlas_config() const;

  const NormResult& norms();
  const std::vector<JacobianSeries>& jacobian();
  const std::vector<RecoveryPoint>& recovery();
  const std::vector<AtlasCell>& atlas();

  // Artifact paths relative to out_dir, for the report's links.
  std::string rel(const std::string& file) const { return "claims/" + file; }

 private:
  std::optional<NormResult> norms_;
  std::optional<std::vector<JacobianSeries>> jacobian_;
  std::optional<std::vector<RecoveryPoint>> recovery_;
  std::optional<std::vector<AtlasCell>> atlas_;
};

}  // namespace vla::analysis
