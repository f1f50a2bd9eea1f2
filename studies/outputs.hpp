#pragma once
// What a study writes into <out>/<id>/ (every file atomically):
//   section.md     the paper's numbers and the measured ones side by side with the difference, the
//                  verdict and its rule, the measured tables, the plots, the settings, how long it took
//                  and where; a --quick run says so at the top
//   verdict.json   {study, title, claims, verdict, quick, rule, held, total, device, provenance, ...}: what the
//                  claims ledger (analysis/claims.cpp) and `vla report` read
//   data/          study.json (every run's exact config, seeds, outcome, git revision, device),
//                  runs.csv, comparison.csv and each measured table as CSV
//   plots/         PNG + CSV + .gp (analysis/plot.hpp)
// and the small readers the summaries need (CSV, JSON) and the plot helpers they share.
#include "analysis/plot.hpp"
#include "studies/study.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace vla::studies {

// A CSV file with a header row, as text cells.
struct CsvData {
  std::filesystem::path path;  // where it was read from (named in errors)
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::size_t index(const std::string& name) const;                 // throws naming the file and the column where absent
  std::vector<double> column(const std::string& name) const;        // "nan" and empty cells read as NaN
  std::vector<std::string> cells(const std::string& name) const;    // as text; a short row's missing cell reads ""
};
CsvData read_csv(const std::filesystem::path& path);
std::string read_text(const std::filesystem::path& path);  // the whole file; throws naming it where unreadable
nlohmann::json read_json(const std::filesystem::path& path);

// Numbers as the report prints them: accuracies with 3 decimals, NaN as "—".
std::string fmt_value(double x, int digits = 3);
std::string fmt_signed(double x, int digits = 3);

// What the runner knows of a study's execution, written into section.md and data/study.json.
struct StudyRecord {
  Plan plan;
  std::vector<RunOutcome> outcomes;  // of plan.runs, in order
  std::string device;                // the device runs were sent to (cpu | cuda)
  double sweep_wall_s = 0;           // wall time of the sweep that trained them (shared by the studies planned with it)
  bool from_store = false;           // that sweep trained nothing: every run came finished from the store
  double summary_s = 0;              // the summary's own time (analyses, timings)
  std::string command;               // how it was produced
};

void write_study(const Study& s, const StudyOptions& o, const Section& sec, const StudyRecord& rec);

// A numeric table for a plot: written to plots/<name>.csv, drawn by plot_csv into plots/<name>.png.
// Returns the PlotRef for the section.
PlotRef plot_table(const StudyContext& ctx, const std::string& name, const std::vector<std::string>& header,
                   const std::vector<std::vector<double>>& rows, const analysis::PlotSpec& spec, const std::string& caption);
// A heat map: rows of (x index, y index, value) drawn as coloured cells labelled with their value, tick
// labels from xlabels / ylabels. plots/<name>.{csv,gp,png}.
PlotRef heat_map(const StudyContext& ctx, const std::string& name, const std::string& title, const std::vector<std::string>& xlabels,
                 const std::vector<std::string>& ylabels, const std::vector<std::vector<double>>& cells, const std::string& xtitle,
                 const std::string& ytitle, const std::string& caption);

}  // namespace vla::studies
