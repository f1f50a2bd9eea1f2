// Table 11 (App. B.2): the MQAR capacity curve n in {8, 16, 24, 32, 48} at 1000 steps, the four mixers
// (the paper: seed 42 only; here 3 seeds). Its runs are shared with Tables 10, 12, 13, Fig. 8 and the
// d_h = 32 rows of Table 4.
#include "studies/mqar_grid.hpp"
#include "studies/study.hpp"

#include <fmt/format.h>

namespace vla::studies {

MqarGrid capacity_grid(const StudyOptions& o);  // shared with fig8-overload and table10-capacity-boundary

MqarGrid capacity_grid(const StudyOptions& o) {  // Tables 10, 11, 13, Fig. 8: 1000 steps
  return paper_grid(o, o.quick ? std::vector<int>{8, 48} : std::vector<int>{8, 16, 24, 32, 48}, 1000);
}

Study table11_capacity_curve() {
  Study s;
  s.id = "table11-capacity-curve";
  s.title = "MQAR capacity curve n = 8..48 (1000 steps)";
  s.source = "Table 11, App. B.2 (seeds/000 lines 543-551)";
  const int ns[] = {8, 16, 24, 32, 48};
  const double v[4][5] = {{0.152, 0.091, 0.070, 0.057, 0.043},
                          {0.150, 0.091, 0.069, 0.056, 0.043},
                          {0.965, 0.009, 0.007, 0.008, 0.008},
                          {0.997, 0.990, 0.994, 0.623, 0.044}};
  for (int m = 0; m < 4; ++m)
    for (int i = 0; i < 5; ++i)
      s.paper.push_back({fmt::format("{} {}", recipe::kMixers[m], ns[i]), v[m][i], fmt::format("Table 11, line {}", 546 + m)});
  s.plan = plan_of([](const StudyOptions& o) { return std::vector<MqarGrid>{capacity_grid(o)}; });
  s.summarise = [](StudyContext& ctx, Section& sec) {
    sec.question = "Does VLA keep ~0.99 up to n = 24 and 0.62 at n = d_h = 32, collapsing at n = 48 with the others, while DeltaNet is "
                   "at 0.965 for n = 8 and near random from n = 16?";
    const MqarGrid g = capacity_grid(ctx.opt);
    const auto cells = g.cells(ctx);
    sec.tables.push_back(grid_table("capacity_curve", "Eval exact match, mean ± sd over seeds, 1000 steps.", g, cells));
    sec.tables.push_back(per_seed_table("capacity_curve_per_seed", "Per seed (the paper ran seed 42 only).", g, cells));
    sec.plots.push_back(grid_plot(ctx, "capacity_curve", "MQAR capacity curve, 1000 steps", g, cells, paper_values(ctx),
                                  "Table 11: measured means (lines) and the paper's seed-42 values (points); d_h = 32 dashed",
                                  "set arrow from 32, graph 0 to 32, graph 1 nohead dt 2\n"));
    compare_grid(ctx, g, cells, "", "1000 steps", 0.05, sec.comparisons);
    sec.verdict = verdict_of(sec.comparisons);
    sec.verdict_rule = "Each of the paper's 20 values against the mean over seeds, |diff| <= 0.05; holds if all do, fails if none.";
    sec.settings = recipe::describe(ctx.opt) + "- n in {8, 16, 24, 32, 48} (T = 3n + 1), 1000 steps (the paper: seed 42 only).\n";
    sec.notes = "Sec. 6.6 also names n = 64 and 96: with keys {0..63} and OOD keys {64..126} in the vocabulary of 128 "
                "(docs/training.md), MQAR holds at most 63 distinct keys, so n >= 64 is not expressible here.\n";
  };
  return s;
}

}  // namespace vla::studies
