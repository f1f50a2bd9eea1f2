#pragma once
// Plots: a gnuplot script (pngcairo) written beside its CSV and run when gnuplot is on the PATH.
// Without gnuplot the CSV and the .gp script are still written and the returned note says so.
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace vla::analysis {

struct PlotSeries {
  int column = 2;       // 1-based CSV column for y
  std::string legend;
  int x_column = 1;
  std::string style;    // more gnuplot plot options, e.g. "lc rgb '#1b9e77' dt 2 pt 7"; empty: gnuplot's cycle
  PlotSeries(int column = 2, std::string legend = {}, int x_column = 1, std::string style = {})
      : column(column), legend(std::move(legend)), x_column(x_column), style(std::move(style)) {}
};

struct PlotSpec {
  std::string title, xlabel, ylabel;
  bool logy = false, logx = false;
  std::vector<PlotSeries> series;
  std::string extra;    // extra gnuplot lines (e.g. a reference line), written before `plot`
  std::string with = "lines";
};

inline PlotSpec plot_spec(std::string title, std::string xlabel, std::string ylabel, bool logy = false,
                          bool logx = false) {
  PlotSpec p;
  p.title = std::move(title);
  p.xlabel = std::move(xlabel);
  p.ylabel = std::move(ylabel);
  p.logy = logy;
  p.logx = logx;
  return p;
}

bool gnuplot_available();
// A string as a gnuplot string literal (double quotes, backslash-escaped).
std::string gnuplot_quote(const std::string& s);
// Writes `script` to gp (atomically) and runs gnuplot on it in gp's folder; the note names png, or says
// why it was not drawn (no gnuplot: csv and gp are still there). plot_csv ends here; scripts it cannot
// express (heat maps, labels) come here directly.
std::string run_gnuplot(const std::filesystem::path& gp, const std::string& script, const std::filesystem::path& csv,
                        const std::filesystem::path& png);
// Writes <png without .png>.gp, runs it; returns a one-line note ("" on success is never: it names the PNG).
std::string plot_csv(const std::filesystem::path& csv, const std::filesystem::path& png, const PlotSpec& spec);

}  // namespace vla::analysis
