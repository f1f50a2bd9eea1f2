#include "studies/mqar_grid.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace vla::studies {

std::string paper_name(const std::string& mixer) {
  if (mixer == "softmax") return "Softmax";
  if (mixer == "linear") return "Linear";
  if (mixer == "deltanet") return "DeltaNet";
  if (mixer == "vla") return "VLA";
  if (mixer == "vla-fixed-a") return "VLA, A_t = 10 I fixed";
  if (mixer == "vla-no-knorm") return "VLA, no k_hat norm";
  return mixer;
}

MqarGrid paper_grid(const StudyOptions& o, std::vector<int> ns, int steps) {
  MqarGrid g;
  g.ns = std::move(ns);
  g.base.steps = steps;
  g.seeds = recipe::seeds(o);
  return g;
}

MqarGrid recipe_grid(const StudyOptions& o, const recipe::Recipe& r, std::vector<int> ns) {
  MqarGrid g = paper_grid(o, recipe::keep_pairs(o, std::move(ns)), r.steps);
  g.base.lr = r.lr;
  g.seeds = recipe::seeds(o, recipe::kRecipeSeeds);
  return g;
}

recipe::Mqar MqarGrid::at(const std::string& mixer, int n) const {
  recipe::Mqar r = base;
  r.mixer = mixer;
  r.pairs = n;
  return r;
}

void MqarGrid::plan(Plan& p, const StudyOptions& o) const {
  for (const auto& m : mixers)
    for (int n : ns)
      for (auto s : seeds) {
        recipe::Mqar r = at(m, n);
        r.seed = s;
        recipe::add(p, recipe::mqar(r, o), fmt::format("MQAR n = {}, {}, seed {}", n, m, s));
      }
}

std::map<std::string, std::vector<recipe::Cell>> MqarGrid::cells(const StudyContext& ctx) const {
  std::map<std::string, std::vector<recipe::Cell>> c;
  for (const auto& m : mixers)
    for (int n : ns) c[m].push_back(recipe::cell(ctx, at(m, n), seeds));
  return c;
}

PaperLookup paper_values(const StudyContext& ctx, const std::string& suffix) {
  return [&ctx, suffix](const std::string& m, int n) {
    for (const auto& p : ctx.study.paper)
      if (p.key == fmt::format("{} {}{}", m, n, suffix)) return p.value;
    return kNaN;
  };
}

void compare_grid(const StudyContext& ctx, const MqarGrid& g, const std::map<std::string, std::vector<recipe::Cell>>& cells,
                  const std::string& suffix, const std::string& label, double tol, std::vector<Comparison>& out) {
  for (std::size_t i = 0; i < g.ns.size(); ++i)
    for (const auto& m : g.mixers)
      for (const auto& p : ctx.study.paper)
        if (p.key == fmt::format("{} {}{}", m, g.ns[i], suffix)) {
          out.push_back(within_abs(fmt::format("{}, n = {}, {} (mean of {} seeds)", paper_name(m), g.ns[i], label, g.seeds.size()), p,
                                   cells.at(m)[i].mean, tol));
          mark_not_run(out.back(), cells.at(m)[i]);
        }
}

void mark_not_run(Comparison& c, const recipe::Cell& cell) {
  if (!cell.not_run()) return;
  c.measured_text = "not run";
  c.info = true;
}

TextTable grid_table(const std::string& name, const std::string& caption, const MqarGrid& g,
                     const std::map<std::string, std::vector<recipe::Cell>>& cells) {
  TextTable t{name, caption, {"model"}, {}};
  for (int n : g.ns) t.header.push_back(fmt::format("n = {}", n));
  for (const auto& m : g.mixers) {
    std::vector<std::string> row{paper_name(m)};
    for (const auto& c : cells.at(m)) row.push_back(c.mean_sd());
    t.rows.push_back(row);
  }
  return t;
}

TextTable per_seed_table(const std::string& name, const std::string& caption, const MqarGrid& g,
                         const std::map<std::string, std::vector<recipe::Cell>>& cells) {
  TextTable t{name, caption, {"model", "n"}, {}};
  for (auto s : g.seeds) t.header.push_back(fmt::format("seed {}", s));
  t.header.push_back("mean ± sd");
  for (const auto& m : g.mixers)
    for (std::size_t i = 0; i < g.ns.size(); ++i) {
      const auto& c = cells.at(m)[i];
      std::vector<std::string> row{paper_name(m), std::to_string(g.ns[i])};
      for (double a : c.acc) row.push_back(fmt_value(a));
      row.push_back(c.mean_sd());
      t.rows.push_back(row);
    }
  return t;
}

PlotRef accuracy_plot(const StudyContext& ctx, const std::string& name, const std::string& title, const AccuracyAxis& axis,
                      const std::vector<std::string>& mixers, const std::function<double(const std::string&, std::size_t)>& mean,
                      const std::function<double(const std::string&, std::size_t)>& paper, const std::string& caption,
                      const std::string& extra) {
  std::vector<std::string> header{axis.column};
  for (const auto& m : mixers) header.push_back(m + "_mean");
  for (const auto& m : mixers) header.push_back(m + "_paper");
  std::vector<std::vector<double>> rows;
  for (std::size_t i = 0; i < axis.x.size(); ++i) {
    std::vector<double> r{axis.x[i]};
    for (const auto& m : mixers) r.push_back(mean(m, i));
    for (const auto& m : mixers) r.push_back(paper(m, i));
    rows.push_back(r);
  }
  analysis::PlotSpec ps = analysis::plot_spec(title, axis.label, "eval exact match", false, axis.log);
  ps.with = "linespoints";
  ps.extra = "set yrange [0:1.05]\n" + extra;
  const int k = int(mixers.size());
  for (int i = 0; i < k; ++i) ps.series.push_back({2 + i, paper_name(mixers[i]) + " (measured, mean)"});
  for (int i = 0; i < k; ++i)  // a mixer the paper gives no value for here draws no paper series
    if (std::any_of(rows.begin(), rows.end(), [&](const std::vector<double>& r) { return std::isfinite(r[1 + k + i]); }))
      ps.series.push_back({2 + k + i, paper_name(mixers[i]) + " (paper)"});
  return plot_table(ctx, name, header, rows, ps, caption);
}

PlotRef grid_plot(const StudyContext& ctx, const std::string& name, const std::string& title, const MqarGrid& g,
                  const std::map<std::string, std::vector<recipe::Cell>>& cells, const PaperLookup& paper,
                  const std::string& caption, const std::string& extra) {
  const AccuracyAxis n{"n", "n (key-value pairs)", std::vector<double>(g.ns.begin(), g.ns.end())};
  return accuracy_plot(
      ctx, name, title, n, g.mixers, [&](const std::string& m, std::size_t i) { return cells.at(m)[i].mean; },
      [&](const std::string& m, std::size_t i) { return paper ? paper(m, g.ns[i]) : kNaN; }, caption, extra);
}

}  // namespace vla::studies
