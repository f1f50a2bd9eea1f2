#pragma once
// The claims ledger: the quantitative claims of the VLA paper (000) and the core spec (001), each
// paired with the analysis that tests it. A verdict is computed from a measurement against the
// tolerance the claim states here; nothing knows the expected verdict in advance.
//
// Stable ids (used by everything downstream): prop1-bounded-state, prop2-unit-jacobian,
// cor-gradient-flow, prop3-exact-recovery, table2-jacobian-norms, fig4-state-norms,
// fig4-A-norm-decay, sec72-orthogonal-write, remark1-reduction, precision-fp16-bf16, and the
// training claims (registered not-run: they need trained models, which the ledger does not train).
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace vla::analysis {

enum class Verdict { Holds, Fails, Partial, NotRun };
std::string verdict_name(Verdict v);  // holds | fails | partial | not-run

struct ClaimsConfig {
  bool quick = false;                          // the `make run` budget: < 1 minute on 2 cores
  std::filesystem::path out_dir = "reports";   // CSVs and plots go to out_dir/claims/
  std::vector<std::string> only;               // run only these ids (empty: all)
};

struct ClaimResult {
  std::string id, source, paper_says, tolerance;
  std::string measured;        // value(s) with precision and settings
  Verdict verdict = Verdict::NotRun;
  std::string counterexample;  // for fails / partial: the smallest case found
  std::vector<std::string> artifacts;  // plots and CSVs, relative to out_dir
  double seconds = 0;
};

// Context shared by the claims' measurements (analyses are computed once and reused).
struct ClaimsContext;

struct Claim {
  std::string id, source, paper_says, tolerance;
  // Empty for claims that need training: registered with verdict not-run.
  std::function<void(ClaimsContext&, ClaimResult&)> measure;
};

const std::vector<Claim>& claim_registry();
std::vector<ClaimResult> run_claims(const ClaimsConfig& cfg);

std::string claims_markdown(const ClaimsConfig& cfg, const std::vector<ClaimResult>& r);
std::string claims_json(const ClaimsConfig& cfg, const std::vector<ClaimResult>& r);
std::string claims_table(const std::vector<ClaimResult>& r);  // terminal table

}  // namespace vla::analysis
