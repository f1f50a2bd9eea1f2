#pragma once
// The claims ledger: the quantitative claims of the VLA paper (000) and the core spec (001), each
// paired with the analysis that tests it. A verdict is computed from a measurement against the
// tolerance the claim states here; nothing knows the expected verdict in advance.
//
// Stable ids (used by everything downstream): prop1-bounded-state, prop2-unit-jacobian,
// cor-gradient-flow, prop3-exact-recovery, table2-jacobian-norms, fig4-state-norms,
// fig4-A-norm-decay, sec72-orthogonal-write, remark1-reduction, precision-fp16-bf16, and the
// training claims (they need trained models, which the ledger does not train: each names the studies
// that decide it, studies/<id>/, and takes its verdict from their <out_dir>/<id>/verdict.json when they
// have run, labelled as a --quick run when it is one; not-run otherwise).
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
  bool quick = false;                  // decided by a --quick (smoke-size) study run: not the paper-size result
  std::vector<std::string> studies{};  // the studies whose verdict.json decided it (training claims)
};

// Context shared by the claims' measurements (analyses are computed once and reused).
struct ClaimsContext;

struct Claim {
  std::string id, source, paper_says, tolerance;
  // Empty for claims that need training: decided by `studies` (not-run until one of them has run).
  std::function<void(ClaimsContext&, ClaimResult&)> measure;
  std::vector<std::string> studies{};  // training claims: the studies (studies/<id>/) whose verdicts decide it
};

// The verdict of the linked studies, read from <out_dir>/<id>/verdict.json (written by `vla study run`):
// holds if every study that has run holds, fails if every one fails, partial otherwise; quick if any of
// them was a --quick run; the counterexample, each study's first judged comparison that does not hold.
// Returns false (r untouched) when none of them has run.
bool read_study_verdicts(const ClaimsConfig& cfg, const std::vector<std::string>& studies, ClaimResult& r);

const std::vector<Claim>& claim_registry();
std::vector<ClaimResult> run_claims(const ClaimsConfig& cfg);

std::string claims_markdown(const ClaimsConfig& cfg, const std::vector<ClaimResult>& r);
std::string claims_json(const ClaimsConfig& cfg, const std::vector<ClaimResult>& r);
std::string claims_table(const std::vector<ClaimResult>& r);  // terminal table

}  // namespace vla::analysis
