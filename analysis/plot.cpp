#include "analysis/plot.hpp"

#include "core/io/atomic_file.hpp"

#include <fmt/format.h>

#include <cstdlib>

namespace vla::analysis {

bool gnuplot_available() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

std::string gnuplot_quote(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return "\"" + o + "\"";
}

std::string plot_csv(const std::filesystem::path& csv, const std::filesystem::path& png, const PlotSpec& spec) {
  std::filesystem::path gp = png;
  gp.replace_extension(".gp");
  std::string s;
  s += "set terminal pngcairo size 900,560 enhanced font 'Sans,11'\n";
  s += fmt::format("set output {}\n", gnuplot_quote(png.filename().string()));
  s += "set datafile separator ','\nset datafile missing 'nan'\n";
  s += fmt::format("set title {} noenhanced\nset xlabel {} noenhanced\nset ylabel {} noenhanced\n", gnuplot_quote(spec.title),
                   gnuplot_quote(spec.xlabel), gnuplot_quote(spec.ylabel));
  s += "set grid\nset key outside right top noenhanced\n";
  if (spec.logy) s += "set logscale y\nset format y '10^{%L}'\n";
  if (spec.logx) s += "set logscale x\n";
  s += spec.extra;
  s += "plot ";
  for (std::size_t i = 0; i < spec.series.size(); ++i) {
    const auto& se = spec.series[i];
    s += fmt::format("{}{} skip 1 using {}:{} with {} lw 2 {}{}title {}", i ? ", \\\n     " : "",
                     gnuplot_quote(csv.filename().string()), se.x_column, se.column, spec.with, se.style,
                     se.style.empty() ? "" : " ", gnuplot_quote(se.legend));
  }
  s += "\n";
  return run_gnuplot(gp, s, csv, png);
}

std::string run_gnuplot(const std::filesystem::path& gp, const std::string& script, const std::filesystem::path& csv,
                        const std::filesystem::path& png) {
  io::write_text_atomically(gp, script);
  if (!gnuplot_available())
    return fmt::format("  gnuplot not found: wrote {} and {} (run gnuplot there to draw {})\n", csv.string(),
                       gp.string(), png.filename().string());
  const std::string cmd = fmt::format("cd {} && gnuplot {} 2>&1", gnuplot_quote(gp.parent_path().empty() ? "." : gp.parent_path().string()),
                                      gnuplot_quote(gp.filename().string()));
  if (std::system(cmd.c_str()) != 0) return fmt::format("  gnuplot failed on {}\n", gp.string());
  return fmt::format("  plot {}\n", png.string());
}

}  // namespace vla::analysis
