// Table 10 (App. B.2): eval accuracy at the capacity boundary n = 32 = d_h and in overload n = 48, 1000
// steps (the paper: seed 42 only). The runs of table11-capacity-curve at those n.
#include "studies/mqar_grid.hpp"
#include "studies/study.hpp"

#include <fmt/format.h>

namespace vla::studies {

MqarGrid capacity_grid(const StudyOptions& o);

Study table10_capacity_boundary() {
  Study s;
  s.id = "table10-capacity-boundary";
  s.title = "Capacity boundary n = 32 and overload n = 48 (1000 steps)";
  s.source = "Table 10, App. B.2 (seeds/000 lines 535-542)";
  const double v[4][2] = {{0.057, 0.043}, {0.056, 0.043}, {0.008, 0.008}, {0.623, 0.044}};
  for (int m = 0; m < 4; ++m) {
    s.paper.push_back({fmt::format("{} 32", recipe::kMixers[m]), v[m][0], fmt::format("Table 10, line {}", 537 + m)});
    s.paper.push_back({fmt::format("{} 48", recipe::kMixers[m]), v[m][1], fmt::format("Table 10, line {}", 537 + m)});
  }
  auto grid = [](const StudyOptions& o) { return paper_grid(o, {32, 48}, capacity_grid(o).base.steps); };
  s.plan = plan_of([grid](const StudyOptions& o) { return std::vector<MqarGrid>{grid(o)}; });
  s.summarise = [grid](StudyContext& ctx, Section& sec) {
    sec.question = "At n = d_h = 32 does VLA retain 62.3% while every baseline is near random, and at n = 48 do all models collapse "
                   "to ~0.04?";
    const MqarGrid g = grid(ctx.opt);
    const auto cells = g.cells(ctx);
    sec.tables.push_back(per_seed_table("boundary", "Eval exact match per seed, 1000 steps (the paper: seed 42 only).", g, cells));
    compare_grid(ctx, g, cells, "", "1000 steps", 0.05, sec.comparisons);
    sec.verdict = verdict_of(sec.comparisons);
    sec.verdict_rule = "Each of the paper's 8 values against the mean over seeds, |diff| <= 0.05.";
    sec.settings = recipe::describe(ctx.opt) + "- n in {32, 48}, 1000 steps: the runs of table11-capacity-curve.\n";
  };
  return s;
}

}  // namespace vla::studies
