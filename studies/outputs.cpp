#include "studies/outputs.hpp"

#include "core/io/atomic_file.hpp"
#include "core/io/csv.hpp"
#include "core/io/provenance.hpp"
#include "studies/run_store.hpp"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace vla::studies {

namespace fs = std::filesystem;

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  if (!in) throw std::runtime_error(fmt::format("cannot read '{}'", p.string()));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') { out.back() += '"'; ++i; }
      else if (c == '"') quoted = false;
      else out.back() += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else if (c != '\r') {
      out.back() += c;
    }
  }
  return out;
}

std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
  return o + "\"";
}

std::string md_cell(const std::string& s) {
  std::string o;
  for (char c : s) o += c == '|' ? std::string("\\|") : c == '\n' ? std::string("<br>") : std::string(1, c);
  return o;
}

std::string status_name(RunOutcome::Status s) {
  switch (s) {
    case RunOutcome::Status::Complete: return "complete";
    case RunOutcome::Status::Diverged: return "diverged";
    case RunOutcome::Status::Interrupted: return "interrupted";
    case RunOutcome::Status::Skipped: return "skipped";
  }
  return "?";
}

std::string paper_cell(const Comparison& c) { return c.paper_text.empty() ? fmt_value(c.paper) : c.paper_text; }
std::string measured_cell(const Comparison& c) { return c.measured_text.empty() ? fmt_value(c.measured) : c.measured_text; }
std::string difference_cell(const Comparison& c) {
  return std::isfinite(c.paper) && std::isfinite(c.measured) ? fmt_signed(c.measured - c.paper) : "";
}

}  // namespace

std::size_t CsvData::index(const std::string& name) const {
  for (std::size_t i = header.size(); i-- > 0;)  // the last of duplicate names, as before
    if (header[i] == name) return i;
  throw std::invalid_argument(fmt::format("CSV '{}' has no '{}' column", path.string(), name));
}

std::vector<std::string> CsvData::cells(const std::string& name) const {
  const std::size_t k = index(name);
  std::vector<std::string> v;
  for (const auto& r : rows) v.push_back(k < r.size() ? r[k] : std::string());
  return v;
}

std::vector<double> CsvData::column(const std::string& name) const {
  std::vector<double> v;
  for (const std::string& x : cells(name)) v.push_back(x.empty() || x == "nan" ? kNaN : std::stod(x));
  return v;
}

CsvData read_csv(const fs::path& path) {
  std::istringstream in(read_text(path));
  CsvData d;
  d.path = path;
  std::string line;
  if (std::getline(in, line)) d.header = split_csv_line(line);
  while (std::getline(in, line))
    if (!line.empty()) d.rows.push_back(split_csv_line(line));
  return d;
}

nlohmann::json read_json(const fs::path& path) {
  try {
    return nlohmann::json::parse(read_text(path));
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(fmt::format("'{}' is not valid JSON: {}", path.string(), e.what()));
  }
}

std::string fmt_value(double x, int digits) {
  if (std::isnan(x)) return "—";
  const double a = std::abs(x);
  if (a >= 1e5 || (x != 0 && a < 1e-4)) return fmt::format("{:.{}g}", x, digits);
  return fmt::format("{:.{}f}", x, a >= 100 ? 1 : digits);
}

std::string fmt_signed(double x, int digits) {
  if (std::isnan(x)) return "—";
  return fmt::format("{}{}", x >= 0 ? "+" : "", fmt_value(x, digits));
}

std::string TextTable::markdown() const {
  std::string s = "|";
  for (const auto& h : header) s += fmt::format(" {} |", md_cell(h));
  s += "\n|";
  for (std::size_t i = 0; i < header.size(); ++i) s += "---|";
  s += "\n";
  for (const auto& r : rows) {
    s += "|";
    for (const auto& c : r) s += fmt::format(" {} |", md_cell(c));
    s += "\n";
  }
  return s;
}

void TextTable::write_csv(const fs::path& path) const {
  io::write_atomically(path, [&](std::ostream& o) {
    for (std::size_t i = 0; i < header.size(); ++i) o << (i ? "," : "") << csv_cell(header[i]);
    o << '\n';
    for (const auto& r : rows) {
      for (std::size_t i = 0; i < r.size(); ++i) o << (i ? "," : "") << csv_cell(r[i]);
      o << '\n';
    }
  });
}

PlotRef plot_table(const StudyContext& ctx, const std::string& name, const std::vector<std::string>& header,
                   const std::vector<std::vector<double>>& rows, const analysis::PlotSpec& spec, const std::string& caption) {
  io::CsvTable t(header);
  for (const auto& r : rows) t.add_row(r);
  const fs::path csv = ctx.plot_dir() / (name + ".csv");
  t.write(csv);
  analysis::plot_csv(csv, ctx.plot_dir() / (name + ".png"), spec);
  return {"plots/" + name + ".png", caption};
}

PlotRef heat_map(const StudyContext& ctx, const std::string& name, const std::string& title, const std::vector<std::string>& xlabels,
                 const std::vector<std::string>& ylabels, const std::vector<std::vector<double>>& cells, const std::string& xtitle,
                 const std::string& ytitle, const std::string& caption) {
  const fs::path csv = ctx.plot_dir() / (name + ".csv"), png = ctx.plot_dir() / (name + ".png"),
                 gp = ctx.plot_dir() / (name + ".gp");
  io::CsvTable t({"x", "y", "value"});
  for (const auto& c : cells) t.add_row(c);
  t.write(csv);
  using analysis::gnuplot_quote;
  auto tics = [](const std::vector<std::string>& labels) {
    std::string s = "(";
    for (std::size_t i = 0; i < labels.size(); ++i) s += fmt::format("{}{} {}", i ? ", " : "", gnuplot_quote(labels[i]), i);
    return s + ")";
  };
  std::string s;
  s += fmt::format("set terminal pngcairo size {},{} enhanced font 'Sans,11'\n", 160 + 110 * int(xlabels.size()),
                   140 + 60 * int(ylabels.size()));
  s += fmt::format("set output {}\n", gnuplot_quote(png.filename().string()));
  s += "set datafile separator ','\nset datafile missing 'nan'\n";
  s += fmt::format("set title {} noenhanced\nset xlabel {} noenhanced\nset ylabel {} noenhanced\n", gnuplot_quote(title),
                   gnuplot_quote(xtitle), gnuplot_quote(ytitle));
  s += fmt::format("set xtics {}\nset ytics {}\n", tics(xlabels), tics(ylabels));
  s += fmt::format("set xrange [-0.5:{}]\nset yrange [-0.5:{}]\n", double(xlabels.size()) - 0.5, double(ylabels.size()) - 0.5);
  s += "set cbrange [0:1]\nset palette defined (0 '#f7f7f7', 0.5 '#fdae61', 1 '#1a9641')\nunset key\n";
  s += fmt::format("plot {0} skip 1 using 1:2:3 with image, {0} skip 1 using 1:2:(sprintf('%.2f', $3)) with labels\n",
                   gnuplot_quote(csv.filename().string()));
  analysis::run_gnuplot(gp, s, csv, png);
  return {"plots/" + name + ".png", caption};
}

void write_study(const Study& s, const StudyOptions& o, const Section& sec, const StudyRecord& rec) {
  const fs::path dir = o.out / s.id;
  const bool quick = o.quick && s.sized;  // a one-size study runs whole under --quick
  fs::create_directories(dir / "data");
  fs::create_directories(dir / "plots");
  const auto prov = io::provenance(rec.device);

  // data/: every run's exact configuration and outcome, the comparison, the measured tables.
  nlohmann::json runs = nlohmann::json::array();
  TextTable rt{"runs", "", {"task", "n", "T", "mixer", "d_head", "seed", "steps", "lr", "batch", "ood", "status", "eval_accuracy",
                            "final_loss", "device", "wall_s", "store"}, {}};
  int complete = 0, diverged = 0, skipped = 0;
  double run_seconds = 0;
  for (const auto& out : rec.outcomes) {
    const auto& c = out.cfg;
    complete += out.status == RunOutcome::Status::Complete;
    diverged += out.status == RunOutcome::Status::Diverged;
    skipped += out.status == RunOutcome::Status::Skipped;
    run_seconds += std::isfinite(out.wall_s) ? out.wall_s : 0;
    const std::string store = out.dir.empty() ? "" : fs::relative(out.dir, o.out).string();
    runs.push_back({{"config", c.to_json()}, {"status", status_name(out.status)}, {"eval_accuracy", out.eval_accuracy},
                    {"final_loss", out.final_loss}, {"device", out.device}, {"wall_s", out.wall_s}, {"step_ms", out.step_ms},
                    {"diverged_step", out.diverged_step}, {"store", store}});
    rt.rows.push_back({c.task.task, c.task.task == "mqar" ? std::to_string(c.task.pairs) : "", std::to_string(c.task.length()),
                       c.model.mixer.mixer, std::to_string(c.model.d_head), std::to_string(c.seed), std::to_string(c.steps),
                       fmt::format("{:g}", c.opt.lr), std::to_string(c.batch), c.ood ? "1" : "0", status_name(out.status),
                       fmt_value(out.eval_accuracy, 4), fmt_value(out.final_loss, 4), out.device, fmt::format("{:.1f}", out.wall_s), store});
  }
  nlohmann::json blocked = nlohmann::json::array();
  for (const auto& b : rec.plan.blocked) blocked.push_back({{"what", b.what}, {"reason", b.reason}});
  nlohmann::json paper = nlohmann::json::array();
  for (const auto& p : s.paper) paper.push_back({{"key", p.key}, {"value", p.value}, {"where", p.where}});
  std::vector<std::uint64_t> seeds;
  for (const auto& out : rec.outcomes)
    if (std::find(seeds.begin(), seeds.end(), out.cfg.seed) == seeds.end()) seeds.push_back(out.cfg.seed);
  const nlohmann::json study_json{{"study", s.id}, {"title", s.title}, {"source", s.source}, {"quick", quick},
                                  {"command", rec.command}, {"provenance", prov}, {"seeds", seeds}, {"paper", paper},
                                  {"runs", runs}, {"blocked", blocked}, {"sweep_wall_s", rec.sweep_wall_s}, {"from_store", rec.from_store},
                                  {"summary_s", rec.summary_s}, {"facts", sec.facts}};
  io::write_text_atomically(dir / "data" / "study.json", study_json.dump(2) + "\n");
  if (!rec.outcomes.empty()) rt.write_csv(dir / "data" / "runs.csv");
  TextTable ct{"comparison", "", {"item", "paper", "measured", "difference", "tolerance", "holds", "in_verdict", "paper_source"}, {}};
  int held = 0, total = 0;
  for (const auto& c : sec.comparisons) {
    ct.rows.push_back({c.item, paper_cell(c), measured_cell(c), difference_cell(c), c.tolerance, c.holds ? "yes" : "no",
                       c.info ? "no" : "yes", c.where});
    if (!c.info) { ++total; held += c.holds; }
  }
  ct.write_csv(dir / "data" / "comparison.csv");
  for (const auto& t : sec.tables) t.write_csv(dir / "data" / (t.name + ".csv"));

  // section.md
  std::string m = fmt::format("## {} — {}\n\n", s.id, s.title);
  const auto claims = claims_of(s.id);
  m += fmt::format("Paper: {}.{}\n\n", s.source, claims.empty() ? "" : fmt::format(" Decides the claims-ledger entry `{}`.", fmt::join(claims, "`, `")));
  if (quick)
    m += "> **Quick run (the CI smoke size): NOT the paper-size result.** The model, steps, batch and seeds are shrunk "
         "(docs/studies.md); the numbers below only show that the study runs end to end.\n\n";
  if (!sec.question.empty()) m += "**Question.** " + sec.question + "\n\n";
  m += fmt::format("**Verdict: {}{}** ({} of {} comparisons hold). {}\n\n", analysis::verdict_name(sec.verdict),
                   quick ? " (quick)" : "", held, total, sec.verdict_rule);
  if (!sec.comparisons.empty()) {
    m += "### Paper vs measured\n\n| item | paper | measured | difference | tolerance | holds | paper source |\n|---|---|---|---|---|---|---|\n";
    for (const auto& c : sec.comparisons)
      m += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", md_cell(c.item), md_cell(paper_cell(c)), md_cell(measured_cell(c)),
                       difference_cell(c), md_cell(c.tolerance), c.info ? "(info)" : c.holds ? "yes" : "**no**", md_cell(c.where));
    m += "\n";
  }
  if (!sec.tables.empty()) {
    m += "### Measured\n\n";
    for (const auto& t : sec.tables) m += (t.caption.empty() ? "" : t.caption + "\n\n") + t.markdown() + "\n";
  }
  if (!sec.plots.empty()) {
    m += "### Plots\n\n";
    for (const auto& p : sec.plots) m += fmt::format("![{}]({})\n\n*{}*\n\n", p.caption, p.png, p.caption);
  }
  m += "### Settings\n\n" + sec.settings + (sec.settings.empty() || sec.settings.back() == '\n' ? "" : "\n");
  if (!rec.outcomes.empty())
    m += fmt::format("- Training: {} runs ({} complete, {} diverged{}), {:.0f} run-seconds in all, trained on {} (run store `{}`); {}\n",
                     rec.outcomes.size(), complete, diverged,
                     skipped ? fmt::format(", {} not run: no {} kernel and the CPU fallback off", skipped, rec.device) : "", run_seconds,
                     rec.device, fs::relative(o.store_root(), o.out).string(),
                     rec.from_store ? std::string("every run came finished from the store (trained by earlier sweeps: each run's "
                                                  "summary.json holds its device, git revision and time).")
                                    : fmt::format("the sweep that trained them (with every study planned beside this one) took {:.0f} s wall.",
                                                  rec.sweep_wall_s));
  for (const auto& b : rec.plan.blocked) m += fmt::format("- Not run: {} — {}\n", b.what, b.reason);
  m += fmt::format("- Produced by `{}` at git {} on {} ({}), {}; summary {:.1f} s. Data: `data/` (study.json has every run's exact "
                   "config), plots: `plots/`.\n\n",
                   rec.command, prov.value("git", "?"), prov.value("host", "?"), rec.device, prov.value("utc", "?"), rec.summary_s);
  if (!sec.notes.empty()) m += "### Notes\n\n" + sec.notes + (sec.notes.back() == '\n' ? "\n" : "\n\n");
  io::write_text_atomically(dir / "section.md", m);

  // verdict.json: what the claims ledger and the report read.
  nlohmann::json comps = nlohmann::json::array();
  for (const auto& c : sec.comparisons)
    comps.push_back({{"item", c.item}, {"paper", paper_cell(c)}, {"measured", measured_cell(c)}, {"holds", c.holds}, {"info", c.info}});
  const nlohmann::json v{{"study", s.id}, {"title", s.title}, {"source", s.source}, {"claims", claims},
                         {"verdict", analysis::verdict_name(sec.verdict)}, {"quick", quick}, {"rule", sec.verdict_rule},
                         {"held", held}, {"total", total}, {"runs", rec.outcomes.size()}, {"blocked", rec.plan.blocked.size()},
                         {"device", rec.device}, {"command", rec.command}, {"provenance", prov}, {"comparisons", comps},
                         {"facts", sec.facts}};
  io::write_text_atomically(dir / "verdict.json", v.dump(2) + "\n");
}

}  // namespace vla::studies
