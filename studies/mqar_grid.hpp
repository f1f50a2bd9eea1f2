#pragma once
// The MQAR studies' shared shape: a grid of runs (mixers x n x seeds at one recipe), summarised as the
// mean eval accuracy over seeds per (mixer, n), a table of mean ± sd and per-seed values, and a plot of
// accuracy vs n with the paper's points beside the measured curves.
#include "studies/outputs.hpp"
#include "studies/recipe.hpp"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace vla::studies {

struct MqarGrid {
  std::vector<std::string> mixers = recipe::kMixers;
  std::vector<int> ns;
  recipe::Mqar base;                   // steps, lr, d_head, ood; mixer, pairs and seed are set per run
  std::vector<std::uint64_t> seeds;

  recipe::Mqar at(const std::string& mixer, int n) const;
  void plan(Plan& p, const StudyOptions& o) const;  // every (mixer, n, seed)
  // cells[mixer][i]: the seeds' accuracies at ns[i].
  std::map<std::string, std::vector<recipe::Cell>> cells(const StudyContext& ctx) const;
};

// The paper's four mixers at `ns` and `steps` with the recipe's defaults (lr 3e-4, d_h 32) and the
// study's seeds (recipe::seeds).
MqarGrid paper_grid(const StudyOptions& o, std::vector<int> ns, int steps);

// recipe-sensitivity's grid at one recipe: the paper's four mixers at the ns --pairs keeps, lr and steps from
// `r`, its seeds (recipe::kRecipeSeeds). penalty-selectivity takes VLA's row of it.
MqarGrid recipe_grid(const StudyOptions& o, const recipe::Recipe& r, std::vector<int> ns);

// A study's plan: every run of the grids `grids(o)` returns.
template <class Grids> std::function<Plan(const StudyOptions&)> plan_of(Grids grids) {
  return [grids](const StudyOptions& o) {
    Plan p;
    for (const auto& g : grids(o)) g.plan(p, o);
    return p;
  };
}

// The paper's value for (mixer, n), or NaN where it gives none.
using PaperLookup = std::function<double(const std::string& mixer, int n)>;

// The study's paper value keyed "<mixer> <n><suffix>" (e.g. "vla 24", "vla 24 ood"), NaN if it declares none.
PaperLookup paper_values(const StudyContext& ctx, const std::string& suffix = "");
// For every (mixer, n) with a paper value: mean over seeds within `tol` of it. `label` ends the item's name
// ("1000 steps").
void compare_grid(const StudyContext& ctx, const MqarGrid& g, const std::map<std::string, std::vector<recipe::Cell>>& cells,
                  const std::string& suffix, const std::string& label, double tol, std::vector<Comparison>& out);

// A comparison whose runs were not made (skipped) is shown as "not run" and does not enter the verdict.
void mark_not_run(Comparison& c, const recipe::Cell& cell);

// Rows: mixer; columns: n (mean ± sd over seeds).
TextTable grid_table(const std::string& name, const std::string& caption, const MqarGrid& g,
                     const std::map<std::string, std::vector<recipe::Cell>>& cells);
// Rows: (mixer, n); columns: each seed, mean, sd (the per-seed view of Table 9).
TextTable per_seed_table(const std::string& name, const std::string& caption, const MqarGrid& g,
                         const std::map<std::string, std::vector<recipe::Cell>>& cells);
// Eval exact match against an x axis (n, T, ...), one line per mixer: the measured mean at x[i] and, for
// the mixers the paper gives a value for, the paper's. mean(m, i), paper(m, i): NaN where there is none.
struct AccuracyAxis {
  std::string column, label;  // the CSV column and the axis title
  std::vector<double> x;
  bool log = false;
};
PlotRef accuracy_plot(const StudyContext& ctx, const std::string& name, const std::string& title, const AccuracyAxis& axis,
                      const std::vector<std::string>& mixers, const std::function<double(const std::string&, std::size_t)>& mean,
                      const std::function<double(const std::string&, std::size_t)>& paper, const std::string& caption,
                      const std::string& extra = "");
// Accuracy vs n: measured means (lines) and the paper's values (points).
PlotRef grid_plot(const StudyContext& ctx, const std::string& name, const std::string& title, const MqarGrid& g,
                  const std::map<std::string, std::vector<recipe::Cell>>& cells, const PaperLookup& paper,
                  const std::string& caption, const std::string& extra = "");

// Display name of a mixer as the paper writes it.
std::string paper_name(const std::string& mixer);

}  // namespace vla::studies
