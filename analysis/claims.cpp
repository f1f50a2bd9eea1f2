// The ledger's runner and its three renderings (terminal, markdown, JSON).
#include "analysis/claims.hpp"

#include "analysis/claims_context.hpp"
#include "core/io/provenance.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <set>

namespace vla::analysis {

std::string verdict_name(Verdict v) {
  switch (v) {
    case Verdict::Holds: return "holds";
    case Verdict::Fails: return "fails";
    case Verdict::Partial: return "partial";
    case Verdict::NotRun: return "not-run";
  }
  return "?";
}

std::vector<ClaimResult> run_claims(const ClaimsConfig& cfg) {
  const auto& reg = claim_registry();
  std::set<std::string> ids;
  for (const auto& c : reg) ids.insert(c.id);
  for (const auto& id : cfg.only)
    if (!ids.count(id))
      throw std::invalid_argument(fmt::format("--only: unknown claim id '{}' (allowed: {})", id, fmt::join(ids, ", ")));
  ClaimsContext ctx(cfg);
  std::vector<ClaimResult> out;
  for (const auto& c : reg) {
    ClaimResult r{c.id, c.source, c.paper_says, c.tolerance, "", Verdict::NotRun, "", {}, 0.0};
    const bool selected = cfg.only.empty() || std::find(cfg.only.begin(), cfg.only.end(), c.id) != cfg.only.end();
    if (!c.measure) {
      if (!read_study_verdicts(cfg, c.studies, r)) r.measured = "needs training (filled by the training and study issues)";
    } else if (!selected) {
      r.measured = "not selected (--only)";
    } else {
      const auto start = std::chrono::steady_clock::now();
      c.measure(ctx, r);
      r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    out.push_back(std::move(r));
  }
  return out;
}

bool read_study_verdicts(const ClaimsConfig& cfg, const std::vector<std::string>& studies, ClaimResult& r) {
  std::vector<std::string> parts;
  int held = 0, failed = 0, decided = 0;
  bool quick = false;
  std::vector<std::string> ran, counter;
  for (const auto& id : studies) {
    const auto path = cfg.out_dir / id / "verdict.json";
    if (!std::filesystem::exists(path)) {
      parts.push_back(fmt::format("study {}: not run", id));
      continue;
    }
    std::ifstream in(path);
    nlohmann::json v;
    try {
      v = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw std::runtime_error(fmt::format("'{}' is not a study verdict: {}", path.string(), e.what()));
    }
    const std::string verdict = v.value("verdict", "not-run");
    const bool q = v.value("quick", false);
    const auto prov = v.value("provenance", nlohmann::json::object());
    parts.push_back(fmt::format("study {}: {}{} ({} of {} comparisons hold; {} runs on {}; git {}, {}){}", id, verdict,
                                q ? " (QUICK smoke-size run, not the paper-size result)" : "", v.value("held", 0), v.value("total", 0),
                                v.value("runs", 0), v.value("device", "?"), prov.value("git", "?"), prov.value("utc", "?"),
                                v.value("blocked", 0) ? fmt::format("; {} runs not expressible", v.value("blocked", 0)) : ""));
    ran.push_back(id);
    if (verdict == "not-run") continue;
    ++decided;
    held += verdict == "holds";
    failed += verdict == "fails";
    quick = quick || q;
    // The study's first comparison that does not hold, in its own order (smallest n, shortest T, ... first):
    // the counterexample the study found, with what the paper says there.
    for (const auto& c : v.value("comparisons", nlohmann::json::array()))
      if (c.is_object() && !c.value("holds", true) && !c.value("info", false)) {
        counter.push_back(fmt::format("{}: {}: measured {}, paper {}", id, c.value("item", "?"), c.value("measured", "?"), c.value("paper", "?")));
        break;
      }
  }
  if (ran.empty()) return false;
  r.verdict = decided == 0 ? Verdict::NotRun : held == decided ? Verdict::Holds : failed == decided ? Verdict::Fails : Verdict::Partial;
  r.quick = quick;
  r.studies = ran;
  r.tolerance = fmt::format("each study's own (its section.md): {}", fmt::join(studies, ", "));
  r.measured = fmt::format("{}", fmt::join(parts, "; "));
  r.counterexample = fmt::format("{}", fmt::join(counter, "; "));
  for (const auto& id : ran) r.artifacts.push_back(id + "/section.md");
  return true;
}

namespace {
std::string verdict_label(const ClaimResult& c) { return verdict_name(c.verdict) + (c.quick ? " (quick)" : ""); }

std::string md_cell(std::string s) {
  std::string o;
  for (char ch : s) {
    if (ch == '|') o += "\\|";
    else if (ch == '\n') o += "<br>";
    else o += ch;
  }
  return o;
}
}  // namespace

std::string claims_table(const std::vector<ClaimResult>& r) {
  std::string s = fmt::format("{:<24} {:<9} {}\n", "claim", "verdict", "measured");
  for (const auto& c : r) {
    s += fmt::format("{:<24} {:<9} {}\n", c.id, verdict_label(c), c.measured);
    if (!c.counterexample.empty()) s += fmt::format("{:<24} {:<9} counterexample: {}\n", "", "", c.counterexample);
  }
  return s;
}

std::string claims_markdown(const ClaimsConfig& cfg, const std::vector<ClaimResult>& r) {
  const auto prov = io::provenance();
  std::string s = "# Claims ledger\n\n";
  s += fmt::format("Generated by `vla claims{}` at git {} on {} ({}). Every verdict is computed from the measurement "
                   "against the tolerance stated in the table (analysis/claims_registry.cpp); see docs/analysis.md.\n\n",
                   cfg.quick ? " --quick" : "", prov.value("git", "?"), prov.value("host", "?"), prov.value("utc", "?"));
  std::map<std::string, int> counts;
  for (const auto& c : r) counts[verdict_label(c)]++;
  s += "Summary:";
  for (const auto& [k, v] : counts) s += fmt::format(" {} {};", v, k);
  s += "\n\n| id | source | the paper says | tolerance | measured | verdict | counterexample |\n";
  s += "|---|---|---|---|---|---|---|\n";
  for (const auto& c : r)
    s += fmt::format("| `{}` | {} | {} | {} | {} | **{}** | {} |\n", c.id, md_cell(c.source), md_cell(c.paper_says),
                     md_cell(c.tolerance), md_cell(c.measured), verdict_label(c), md_cell(c.counterexample));
  s += "\n## Plots\n\n";
  for (const auto& c : r)
    for (const auto& a : c.artifacts)
      if (a.size() > 4 && a.substr(a.size() - 4) == ".png") s += fmt::format("### {} — {}\n\n![{}]({})\n\n", c.id, a, a, a);
  return s;
}

std::string claims_json(const ClaimsConfig& cfg, const std::vector<ClaimResult>& r) {
  const auto prov = io::provenance();
  nlohmann::json j;
  j["generator"] = cfg.quick ? "vla claims --quick" : "vla claims";
  j["provenance"] = prov;
  j["claims"] = nlohmann::json::array();
  for (const auto& c : r) {
    j["claims"].push_back({{"id", c.id}, {"source", c.source}, {"paper_says", c.paper_says},
                           {"tolerance", c.tolerance}, {"measured", c.measured}, {"verdict", verdict_name(c.verdict)},
                           {"counterexample", c.counterexample}, {"artifacts", c.artifacts}, {"seconds", c.seconds}});
    if (!c.studies.empty()) {  // decided by studies: which, and whether a --quick run (keys absent otherwise)
      j["claims"].back()["studies"] = c.studies;
      j["claims"].back()["quick"] = c.quick;
    }
  }
  return j.dump(2) + "\n";
}

}  // namespace vla::analysis
