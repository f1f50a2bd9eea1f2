#pragma once
// A study reproduces one figure or table of the VLA paper (000): it declares the paper's numbers (with
// the table or figure and the line of the paper's text they come from), the training runs it needs at
// full and --quick size, and how it summarises them into a measured table, a paper-vs-measured
// comparison and a verdict computed against the tolerance it states. Studies are listed in one registry
// (studies/registry.cpp, one line each); the runner (studies/runner.hpp) plans them, trains the union
// of their runs once through the run store and the sweep, and writes each study's folder
// (studies/outputs.hpp). docs/studies.md has the design and how to add a study.
#include "analysis/claims.hpp"
#include "core/train/train_config.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace vla::studies {

using analysis::Verdict;
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// One number the paper states, transcribed from its text. `key` is what the study's summary looks it up
// by ("vla n=24"), `where` the table or figure and the line of seeds/000_*.txt it is on.
struct PaperValue {
  std::string key;
  double value = kNaN;
  std::string where;
};

// How a study is run: its size (full = the paper's; quick = the CI smoke size), the device, the seeds
// (empty: each study's own), where outputs and the shared run store go.
struct StudyOptions {
  bool quick = false;
  std::string device = "cpu";               // cpu | cuda: where the training runs go
  std::vector<std::uint64_t> seeds;         // overrides every study's seeds when not empty
  std::vector<int> recipe_pairs;            // recipe-sensitivity, recipe-capacity: only these MQAR n (empty: all)
  std::filesystem::path out = "reports";    // each study writes out/<id>/
  std::filesystem::path store;              // the run store; empty: out/runs
  std::filesystem::path store_root() const { return store.empty() ? out / "runs" : store; }
};

// A run the paper describes that this toolkit cannot express (the reason is the configuration's own
// validation message), so the study reports it as not run instead of running something else.
struct BlockedRun {
  std::string what, reason;
};

// What a study needs trained: TrainConfigs (equal configs across studies are one run: the store is
// keyed by the whole config) and the runs it cannot express.
struct Plan {
  std::vector<train::TrainConfig> runs;
  std::vector<BlockedRun> blocked;
};

// One training run's result as the sweep left it (studies/sweep.hpp).
struct RunOutcome {
  enum class Status { Complete, Diverged, Interrupted, Skipped };  // Skipped: the device refused it, no fallback
  train::TrainConfig cfg;
  std::filesystem::path dir;
  Status status = Status::Interrupted;
  double eval_accuracy = kNaN;  // final held-out exact match (NaN if diverged)
  double final_loss = kNaN;
  double wall_s = 0, step_ms = 0;
  std::string device;           // where it was trained (cpu | cuda)
  int diverged_step = 0;        // the step whose loss was non-finite
  std::string message;          // why it diverged
  // log.csv's columns by name (step, loss, train_accuracy, lr, grad_norm, eval_accuracy, ...).
  std::vector<double> column(const std::string& name) const;
};

// A paper-vs-measured line: the paper's value, the measured one, the tolerance and whether it holds.
// Comparisons marked info do not enter the verdict (a number shown for context).
struct Comparison {
  std::string item;
  double paper = kNaN, measured = kNaN;
  std::string paper_text, measured_text;  // for values that are not one number ("NaN loss", "0.07-0.08")
  std::string where;                      // the paper's table/figure and line
  std::string tolerance;
  bool holds = false;
  bool info = false;
};

// |measured - paper| <= tol.
Comparison within_abs(std::string item, const PaperValue& paper, double measured, double tol);
// measured within a factor `f` of paper (paper / f <= measured <= paper f).
Comparison within_factor(std::string item, const PaperValue& paper, double measured, double f);
// A statement checked by a condition the study computed (paper_text says what the paper claims).
Comparison statement(std::string item, std::string paper_text, std::string where, std::string measured_text, bool holds,
                     std::string tolerance);
// holds: every comparison in the verdict holds; fails: none does; partial: some; not-run: there is none.
Verdict verdict_of(const std::vector<Comparison>& c);

// A table of text cells: written as CSV under data/ and as Markdown in section.md.
struct TextTable {
  std::string name;     // file stem: data/<name>.csv
  std::string caption;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::string markdown() const;
  void write_csv(const std::filesystem::path& path) const;
};

// A plot written under plots/ (PNG beside its CSV and .gp): its file name and caption.
struct PlotRef {
  std::string png, caption;
};

// What a study's summary produces; studies/outputs.cpp turns it into section.md, verdict.json, data/.
struct Section {
  std::string question;                  // the paper's claim this study tests, in a sentence or two
  std::vector<Comparison> comparisons;
  std::vector<TextTable> tables;         // the measured tables
  std::vector<PlotRef> plots;
  std::string settings;                  // Markdown: what was run (sizes, seeds, steps, where they differ)
  std::string notes;                     // Markdown: deviations, what cannot be measured and why
  Verdict verdict = Verdict::NotRun;     // verdict_of(comparisons) unless the study states another rule
  std::string verdict_rule;              // the tolerance and how the verdict is formed, in words
  nlohmann::json facts = nlohmann::json::object();  // computed values other tools read from verdict.json
};

struct Study;

// What a summary reads: the options, its folder, the outcomes of its runs and the paper's numbers.
class StudyContext {
 public:
  StudyContext(const Study& s, const StudyOptions& o, std::filesystem::path dir,
               const std::map<std::string, RunOutcome>* outcomes, std::filesystem::path store)
      : study(s), opt(o), dir(std::move(dir)), store(std::move(store)), outcomes_(outcomes) {}
  const Study& study;
  const StudyOptions& opt;
  std::filesystem::path dir;    // out/<id>
  std::filesystem::path store;  // the run store root (caches of measurements other than training)
  // The outcome of a planned run (throws std::logic_error for a config the plan did not list).
  const RunOutcome& run(const train::TrainConfig& c) const;
  // The paper's value declared under `key` (throws std::logic_error if the study did not declare it).
  const PaperValue& paper(const std::string& key) const;
  std::filesystem::path data_dir() const { return dir / "data"; }
  std::filesystem::path plot_dir() const { return dir / "plots"; }

 private:
  const std::map<std::string, RunOutcome>* outcomes_;
};

struct Study {
  std::string id, title;
  std::string source;                    // the paper's figure/table and section, with lines
  std::vector<PaperValue> paper;
  std::vector<std::string> after;        // studies whose outputs plan() reads: run before this one
  bool sized = true;                     // false: one size only (--quick runs it whole, unmarked)
  std::function<Plan(const StudyOptions&)> plan;  // empty: no training
  std::function<void(StudyContext&, Section&)> summarise;
};

// The registry (studies/registry.cpp): every study, in report order.
const std::vector<Study>& study_registry();
// The claims-ledger ids this study decides (analysis/claims_registry.cpp lists each training claim's studies).
std::vector<std::string> claims_of(const std::string& study_id);
// The study with this id; std::invalid_argument naming `flag` and the allowed ids otherwise.
const Study& find_study(const std::string& id, const std::string& flag = "ID");

}  // namespace vla::studies
