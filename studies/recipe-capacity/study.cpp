// Capacity at the best recipe (beyond the paper): each mixer at the recipe recipe-sensitivity found best
// for it, MQAR accuracy vs n and vs d_h in {16, 32, 64} (n / d_h in {0.25, 0.5, 0.75, 1, 1.5}), beside the
// untrained capacity of Prop. 3 (analysis/recovery.hpp: write n pairs with random keys, read them back,
// max relative error) at the same d_h and n. Prop. 3 and Sec. 4.3: the per-head capacity is d_h.
#include "analysis/recovery.hpp"
#include "studies/mqar_grid.hpp"
#include "studies/outputs.hpp"
#include "studies/study.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace vla::studies {

namespace {

const std::vector<double> kRatios{0.25, 0.5, 0.75, 1.0, 1.5};

std::vector<int> widths(const StudyOptions& o) { return o.quick ? std::vector<int>{16, 32} : std::vector<int>{16, 32, 64}; }
std::vector<double> ratios(const StudyOptions& o) { return o.quick ? std::vector<double>{0.5, 1.5} : kRatios; }

// n for a ratio at width d (at most 63 distinct keys: docs/training.md); 0 where n would exceed it.
int pairs_for(double r, int d) {
  const int n = int(std::lround(r * d));
  return n > 63 ? (r <= 1.0 ? 63 : 0) : n;
}

MqarGrid grid(const StudyOptions& o, const std::string& mixer, int d, const recipe::Best& b) {
  std::vector<int> ns;
  for (double r : ratios(o))
    if (int n = pairs_for(r, d)) ns.push_back(n);
  MqarGrid g = paper_grid(o, recipe::keep_pairs(o, ns), b.steps);
  g.mixers = {mixer};
  g.base.lr = b.lr;
  g.base.d_head = d;
  return g;
}

std::vector<MqarGrid> grids(const StudyOptions& o) {
  std::vector<MqarGrid> g;
  const auto best = recipe::best_recipes(o);
  for (const auto& m : recipe::kMixers)
    for (int d : widths(o)) g.push_back(grid(o, m, d, best.at(m)));
  return g;
}

}  // namespace

Study recipe_capacity() {
  Study s;
  s.id = "recipe-capacity";
  s.title = "Capacity at the best recipe vs n and d_h, trained and untrained (Prop. 3)";
  s.source = "Beyond the paper: Prop. 3 and Sec. 4.3 (seeds/000 lines 201-209), Sec. 8 (line 370): per-head capacity d_h";
  s.after = {"recipe-sensitivity"};
  s.paper = {{"capacity", 1.0, "Sec. 4.3, line 209; Sec. 8, line 370: the per-head capacity is d_h associations"}};
  s.plan = plan_of(grids);
  s.summarise = [](StudyContext& ctx, Section& sec) {
    sec.question = "Trained at its best recipe, does each mixer's recall hold up to n ~ d_h and collapse past it, at d_h = 16, 32, 64, "
                   "as Prop. 3's capacity says, and how does that compare with the same memory written and read without training?";
    const auto best = recipe::best_recipes(ctx.opt);
    TextTable t{"capacity", "Trained: eval exact match at the best recipe (mean ± sd over seeds). Untrained (Prop. 3): max_i ||S_n k_i - v_i|| "
                            "/ ||v_i|| after writing n pairs with random keys (double, analysis/recovery.hpp).",
                {"mixer", "recipe", "d_h", "n", "n / d_h", "trained accuracy", "untrained recovery error"}, {}};
    std::vector<std::string> header{"ratio"};
    std::vector<std::vector<double>> rows(ratios(ctx.opt).size());
    for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = {ratios(ctx.opt)[i]};
    analysis::PlotSpec pt = analysis::plot_spec("Trained at the best recipe: accuracy vs n / d_h", "n / d_h", "eval exact match");
    analysis::PlotSpec pu = analysis::plot_spec("Untrained (Prop. 3): recovery error vs n / d_h", "n / d_h", "max relative error", true);
    pt.with = pu.with = "linespoints";
    pt.extra = "set yrange [0:1.05]\nset arrow from 1, graph 0 to 1, graph 1 nohead dt 2\n";
    pu.extra = "set arrow from 1, graph 0 to 1, graph 1 nohead dt 2\n";
    // One colour per mixer, one dash and point type per d_h: 4 x 3 series would reuse gnuplot's
    // 8-colour cycle and make two of them look alike.
    const char* colours[] = {"#1b9e77", "#d95f02", "#7570b3", "#e7298a"};
    auto style = [&](std::size_t mi, std::size_t di) {
      return fmt::format("lc rgb '{}' dt {} pt {}", colours[mi % 4], di + 1, std::array{7, 5, 9}[di % 3]);
    };
    const std::vector<int> ws = widths(ctx.opt);
    for (std::size_t mi = 0; mi < recipe::kMixers.size(); ++mi)
      for (std::size_t di = 0; di < ws.size(); ++di) {
        const std::string& m = recipe::kMixers[mi];
        const int d = ws[di];
        const MqarGrid g = grid(ctx.opt, m, d, best.at(m));
        if (g.ns.empty()) continue;  // --pairs left none of this width's n
        const auto cells = g.cells(ctx);
        const int dh = recipe::mqar(g.base, ctx.opt).model.d_head;  // the trained width (--quick: d / 4)
        std::map<int, double> untrained;
        if (m != "softmax") {  // softmax has no fixed-size memory to recover from
          analysis::RecoveryConfig rc;
          rc.d_head = dh;
          rc.ns.clear();
          for (int n : g.ns) rc.ns.push_back(std::max(1, int(std::lround(double(n) * dh / d))));
          rc.key_kinds = {"random"};
          rc.mixers = {m};
          rc.precisions = {"double"};
          for (const auto& pnt : analysis::run_recovery(rc)) untrained[pnt.n] = pnt.max_rel_error;
        }
        header.push_back(fmt::format("{}_d{}_trained", m, d));
        pt.series.push_back({int(header.size()), fmt::format("{} d_h = {}", paper_name(m), d), 1, style(mi, di)});
        if (m != "softmax") {
          header.push_back(fmt::format("{}_d{}_untrained", m, d));
          pu.series.push_back({int(header.size()), fmt::format("{} d_h = {}", paper_name(m), d), 1, style(mi, di)});
        }
        for (std::size_t ri = 0, k = 0; ri < ratios(ctx.opt).size(); ++ri) {
          const int n = pairs_for(ratios(ctx.opt)[ri], d);
          const bool have = n && k < g.ns.size() && g.ns[k] == n;
          const double acc = have ? cells.at(m)[k].mean : kNaN;
          const int un = std::max(1, int(std::lround(double(n) * dh / d)));
          const double err = have && untrained.count(un) ? untrained[un] : kNaN;
          rows[ri].push_back(acc);
          if (m != "softmax") rows[ri].push_back(err);
          if (!have) continue;
          t.rows.push_back({paper_name(m), fmt::format("{}/{}{}", recipe::lr_label(best.at(m).lr), best.at(m).steps, best.at(m).from_study ? "" : " (paper's)"),
                            std::to_string(dh), std::to_string(n), fmt::format("{:.2f}", double(n) / d), cells.at(m)[k].mean_sd(),
                            m == "softmax" ? "—" : fmt::format("{:.3g}", err)});
          if (m == "vla") {
            const double r = ratios(ctx.opt)[ri];
            if (r <= 0.75)
              sec.comparisons.push_back(statement(fmt::format("VLA, d_h = {}, n = {} (n/d_h = {:g}): recall within capacity", d, n, r),
                                                  "n <= d_h is stored", ctx.paper("capacity").where, fmt_value(acc), acc >= 0.9, ">= 0.9"));
            if (r >= 1.5)
              sec.comparisons.push_back(statement(fmt::format("VLA, d_h = {}, n = {} (n/d_h = {:g}): recall past capacity", d, n, r),
                                                  "n > d_h overwrites", ctx.paper("capacity").where, fmt_value(acc), acc <= 0.5, "<= 0.5"));
          }
          ++k;
        }
      }
    sec.tables.push_back(t);
    sec.plots.push_back(plot_table(ctx, "capacity_trained", header, rows, pt, "Trained accuracy vs n / d_h (dashed: n = d_h)"));
    sec.plots.push_back(plot_table(ctx, "capacity_untrained", header, rows, pu, "Untrained recovery error (Prop. 3) vs n / d_h"));
    sec.verdict = verdict_of(sec.comparisons);
    sec.verdict_rule = "For VLA at its best recipe, at each d_h: accuracy >= 0.9 for n <= 0.75 d_h and <= 0.5 at n = 1.5 d_h "
                       "(capacity d_h); the other mixers and the untrained recovery are shown beside it.";
    std::string rec;
    for (const auto& m : recipe::kMixers)
      rec += fmt::format("{} lr {}, {} steps{}; ", paper_name(m), recipe::lr_label(best.at(m).lr), best.at(m).steps, best.at(m).from_study ? "" : " (paper's: no "
                                                                                                                               "recipe study yet)");
    sec.settings = recipe::describe(ctx.opt) + "- Best recipe per mixer (recipe-sensitivity): " + rec +
                   "\n- d_h in {16, 32, 64} at H = 4, d = 128; n = round(r d_h) for r in {0.25, 0.5, 0.75, 1, 1.5}, at most 63 "
                   "(the distinct keys of the vocabulary).\n- Untrained: analysis/recovery.hpp at the trained d_h, random keys, seed 42, "
                   "double, DeltaNet ungated; softmax has no fixed memory.\n";
  };
  return s;
}

}  // namespace vla::studies
