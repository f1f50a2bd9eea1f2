#include "studies/report.hpp"

#include "core/io/provenance.hpp"
#include "studies/outputs.hpp"
#include "studies/recipe.hpp"
#include "studies/report_benchmarks.hpp"
#include "studies/study.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>

namespace vla::studies {

namespace fs = std::filesystem;

namespace {

struct Ran {
  const Study* study;
  nlohmann::json verdict, data;  // verdict.json, data/study.json (empty objects when not run)
  bool ran() const { return !verdict.empty(); }
  bool quick() const { return verdict.value("quick", false); }
  std::string label() const { return ran() ? verdict.value("verdict", "?") + (quick() ? " (quick)" : "") : "not run"; }
};

// A study's section with its relative links made relative to the report (the study's folder prefixed).
std::string relinked(const std::string& md, const std::string& id) {
  std::string out;
  std::size_t i = 0;
  for (std::size_t j; (j = md.find("](", i)) != std::string::npos; i = j + 2) {
    out += md.substr(i, j + 2 - i);
    const std::size_t k = j + 2;
    if (md.compare(k, 6, "plots/") == 0 || md.compare(k, 5, "data/") == 0) out += id + "/";
  }
  return out + md.substr(i);
}

std::string join_ids(const std::vector<std::string>& ids) { return ids.empty() ? "none" : fmt::format("`{}`", fmt::join(ids, "`, `")); }

// "m lr/steps steps (e% of seeds escape, mean over n);" per mixer: the recipe study's best recipes.
std::string best_recipes(const nlohmann::json& facts) {
  std::string best;
  const auto bests = facts.value("best", nlohmann::json::object());  // items() would not keep a temporary alive
  for (const auto& [m, b] : bests.items())
    best += fmt::format(" {} {}/{} steps ({:.0f}% of seeds escape, mean over n);", m, recipe::lr_label(b.value("lr", 0.0)),
                        b.value("steps", 0), 100 * b.value("escape", 0.0));
  return best;
}

// " n = 8: 0% of seeds;" ...: how often VLA leaves the plateau at the paper's recipe, per n of one sweep.
std::string vla_at_paper_recipe(const nlohmann::json& facts) {
  const auto esc = facts.value("escape", nlohmann::json::object());
  const auto pr = facts.value("paper_recipe", nlohmann::json::object());
  const std::string paper = recipe::recipe_label(pr.value("lr", 3e-4), pr.value("steps", 2000));
  std::string per_n;
  if (esc.contains("vla") && esc["vla"].contains(paper))
    for (const auto& n : facts.value("ns", nlohmann::json::array())) {  // in the sweep's order (the keys sort as text)
      const auto key = std::to_string(n.get<int>());
      if (esc["vla"][paper].contains(key)) per_n += fmt::format(" n = {}: {:.0f}% of seeds;", key, 100 * esc["vla"][paper][key].get<double>());
    }
  return per_n;
}

// Full-size recipe sweeps kept as run records (OUT/logs/*/verdict.json of recipe-sensitivity): a section
// shows the runs of one store, and a sweep at other n whose store is gone stays readable there.
std::string recipe_records(const fs::path& out_dir) {
  std::vector<fs::path> dirs;
  if (fs::is_directory(out_dir / "logs"))
    for (const auto& e : fs::directory_iterator(out_dir / "logs"))
      if (fs::exists(e.path() / "verdict.json")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  std::string s;
  for (const auto& d : dirs) {
    std::ifstream in(d / "verdict.json");
    const nlohmann::json v = nlohmann::json::parse(in, nullptr, false);
    if (v.is_discarded() || v.value("study", "") != "recipe-sensitivity" || v.value("quick", false)) continue;
    const auto& f = v["facts"];
    const auto holds_at = f.value("vla_holds_at", std::vector<std::string>{});
    s += fmt::format("  - an earlier sweep, kept as a run record ([logs/{}/section.md](logs/{}/section.md)), n in {}: VLA at the "
                     "paper's recipe{} VLA every seed out of the plateau at {}; best recipe per mixer:{}\n",
                     d.filename().string(), d.filename().string(), f.value("ns", nlohmann::json::array()).dump(), vla_at_paper_recipe(f),
                     holds_at.empty() ? std::string("no recipe") : fmt::format("{}", fmt::join(holds_at, ", ")),
                     best_recipes(f));
  }
  return s;
}

std::string recipe_summary(const Ran& r, const fs::path& out_dir) {
  if (!r.ran()) return "- The recipe question has not been run yet (`vla study run recipe-sensitivity`).\n";
  const auto& f = r.verdict["facts"];
  std::string s = fmt::format("- The recipe question (recipe-sensitivity{}: lr x steps x mixer at n in {}, seeds {}; a seed leaves the "
                              "plateau when its final eval exceeds {}):\n",
                              r.quick() ? ", **quick smoke run: not a result**" : "", f.value("ns", nlohmann::json::array()).dump(),
                              f.value("seeds", nlohmann::json::array()).dump(), f.value("escape_threshold", 0.5));
  const auto pr = f.value("paper_recipe", nlohmann::json::object());
  const std::string paper = recipe::recipe_label(pr.value("lr", 3e-4), pr.value("steps", 2000));
  const std::string per_n = vla_at_paper_recipe(f);
  if (!per_n.empty()) s += fmt::format("  - at the paper's recipe ({}) VLA leaves the plateau at{}\n", paper, per_n);
  const auto at = f.value("vla_holds_at", std::vector<std::string>{});
  if (f.value("vla_holds_at_paper_recipe", false))
    s += "  - so the paper's claims of VLA at ~1.000 within capacity (Fig. 5, Tables 8, 9, 11, 12) **hold at its own recipe**;\n";
  else if (!at.empty())
    s += fmt::format("  - the paper's claims of VLA at ~1.000 within capacity (Fig. 5, Tables 8, 9, 11, 12) **hold only at another recipe**: "
                     "{} (every seed at every n tested), not at the paper's;\n", fmt::join(at, ", "));
  else
    s += "  - the paper's claims of VLA at ~1.000 within capacity (Fig. 5, Tables 8, 9, 11, 12) **do not hold at any recipe tried** "
         "(no recipe of the grid lets every seed leave the plateau at every n <= 24);\n";
  const std::string best = best_recipes(f);
  if (!best.empty()) s += "  - best recipe per mixer:" + best + " recipe-capacity measures capacity there.\n";
  return s + recipe_records(out_dir);
}

}  // namespace

std::string report_markdown(const analysis::ClaimsConfig& cfg, const std::vector<analysis::ClaimResult>& claims) {
  const auto prov = io::provenance();
  std::vector<Ran> studies;
  for (const auto& s : study_registry()) {
    Ran r{&s, nlohmann::json::object(), nlohmann::json::object()};
    const fs::path d = cfg.out_dir / s.id;
    if (fs::exists(d / "verdict.json")) r.verdict = read_json(d / "verdict.json");
    if (fs::exists(d / "data" / "study.json")) r.data = read_json(d / "data" / "study.json");
    studies.push_back(std::move(r));
  }

  std::string m = "# Reproducing the VLA paper: the report\n\n";
  m += fmt::format("Generated by `vla report` at git {} on {} ({}) from the claims ledger (`vla claims{}`) and the study folders in "
                   "`{}` (`vla study run`). Every verdict is computed from measurements against a tolerance stated beside it; a "
                   "verdict marked *(quick)* comes from a smoke-size run and says nothing about the paper's claims. The paper: "
                   "arXiv 2605.11196 (seeds/000).\n\n",
                   prov.value("git", "?"), prov.value("host", "?"), prov.value("utc", "?"), cfg.quick ? " --quick" : "",
                   cfg.out_dir.string());

  // ---- summary, from the verdicts ----
  int full = 0, quick = 0, none = 0;
  std::map<std::string, std::pair<int, int>> counts;  // verdict -> (full, quick)
  for (const auto& r : studies) {
    if (!r.ran()) { ++none; continue; }
    (r.quick() ? quick : full)++;
    auto& c = counts[r.verdict.value("verdict", "?")];
    (r.quick() ? c.second : c.first)++;
  }
  m += "## Summary\n\n";
  m += fmt::format("{} studies: {} run at full size, {} only as --quick smoke runs, {} not run.\n\n", studies.size(), full, quick, none);
  m += "| study verdict | full size | quick (smoke, not a result) |\n|---|---|---|\n";
  for (const char* v : {"holds", "partial", "fails", "not-run"})
    m += fmt::format("| {} | {} | {} |\n", v, counts[v].first, counts[v].second);
  std::map<std::string, std::vector<std::string>> untrained, trained;
  for (const auto& c : claims) {
    const std::string label = analysis::verdict_name(c.verdict) + (c.quick ? " (quick)" : "");
    bool measured_here = false;  // the ledger measures it itself (no training)
    for (const auto& r : analysis::claim_registry()) measured_here = measured_here || (r.id == c.id && r.measure);
    (measured_here ? untrained : trained)[label].push_back(c.id);
  }
  m += "\nThe paper's claims (the ledger below):\n";
  m += "- measured without training:";
  for (const auto& [v, ids] : untrained) m += fmt::format(" {} — {};", v, join_ids(ids));
  m += "\n- needing training (decided by the studies named in the ledger; the figures' and tables' at the paper's recipe):";
  for (const auto& [v, ids] : trained) m += fmt::format(" {} — {};", v, join_ids(ids));
  m += "\n";
  for (const auto& r : studies)
    if (r.study->id == "recipe-sensitivity") m += recipe_summary(r, cfg.out_dir);
  std::vector<std::string> blocked;
  for (const auto& r : studies)
    if (r.ran() && r.verdict.value("blocked", 0) > 0) blocked.push_back(r.study->id);
  if (!blocked.empty())
    m += fmt::format("- Not expressible in this toolkit (planned, not run; each study says why): {}.\n", join_ids(blocked));
  m += "\n";

  // ---- where each result comes from ----
  m += "### Where the results come from\n\n| study | verdict | comparisons held | training runs | device | run-seconds | produced by | git | UTC |\n"
       "|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : studies) {
    if (!r.ran()) {
      m += fmt::format("| {} | not run | | | | | | | |\n", r.study->id);
      continue;
    }
    double run_s = 0;
    for (const auto& x : r.data.value("runs", nlohmann::json::array())) run_s += x.value("wall_s", 0.0);
    const auto pv = r.verdict.value("provenance", nlohmann::json::object());
    m += fmt::format("| [{}]({}/section.md) | {} | {} of {} | {} | {} | {:.0f} | `{}` | {} | {} |\n", r.study->id, r.study->id, r.label(),
                     r.verdict.value("held", 0), r.verdict.value("total", 0), r.verdict.value("runs", 0), r.verdict.value("device", "?"),
                     run_s, r.verdict.value("command", "?"), pv.value("git", "?"), pv.value("utc", "?"));
  }
  m += "\n";

  m += data_parallel_section(cfg.out_dir);
  m += chunked_vla_section(cfg.out_dir);

  // ---- the ledger ----
  std::string ledger = analysis::claims_markdown(cfg, claims);
  ledger.replace(0, std::string("# Claims ledger").size(), "## Claims ledger");
  if (const auto p = ledger.find("\n## Plots\n"); p != std::string::npos) ledger.replace(p, 10, "\n### Ledger plots\n");
  m += ledger + "\n";

  // ---- every study ----
  m += "## Studies\n\n";
  for (const auto& r : studies) {
    const fs::path sec = cfg.out_dir / r.study->id / "section.md";
    if (r.ran() && fs::exists(sec)) {
      m += relinked(read_text(sec), r.study->id) + "\n";
    } else {
      m += fmt::format("## {} — {}\n\nPaper: {}. Not run yet: `vla study run {}`.\n\n", r.study->id, r.study->title, r.study->source,
                       r.study->id);
    }
  }
  return m;
}

}  // namespace vla::studies
