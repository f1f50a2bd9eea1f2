// Fig. 4 (Sec. 6.2) and Fig. 2(b): ||S_t||_F of linear attention, DeltaNet and VLA and ||A_t||_F of VLA
// over T = 1000 random inputs at inference, untrained weights. Measured by the Fig. 4 stability study
// (studies/fig4, `vla stability`: the Sec. 6.2 protocol of analysis/random_protocol.hpp, double, seeds
// 42, 123, 999), with the claims ledger's tolerances (`fig4-state-norms`, `fig4-A-norm-decay`).
#include "studies/fig4/stability.hpp"
#include "studies/outputs.hpp"
#include "studies/study.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace vla::studies {

Study fig4_state_norms() {
  Study s;
  s.id = "fig4-state-norms";
  s.title = "State norms over T = 1000 random inputs (Fig. 4, Fig. 2b)";
  s.source = "Fig. 4 and Sec. 6.2 (seeds/000 lines 283-288), Fig. 2(b) (line 272), Sec. 1.1 (line 26), Sec. 4.1 (line 171), abstract (line 16)";
  s.paper = {{"linear S 1000", 1630, "Sec. 6.2, line 286 (Fig. 4: 1 630 at t = 1 000; ~1 600 in lines 26, 171, 272)"},
             {"vla S max", 15, "Sec. 6.2, line 286: VLA stays below 15 throughout"},
             {"ratio", 109, "abstract, line 16: 109x lower (110x in line 286)"},
             {"A 1", 56, "Fig. 4 right, line 288: decays from ~56"},
             {"A 1000", 10, "Fig. 4 right, line 288: to ~10 over 1 000 steps"}};
  s.sized = false;  // under a second: one size
  s.summarise = [](StudyContext& ctx, Section& sec) {
    StabilityConfig cfg;  // `vla stability` defaults: T = 1000, d_h = 32, seeds 42, 123, 999, linear/deltanet/vla, double
    const auto r = run_stability(cfg);
    write_stability(r, ctx.data_dir());
    const auto& c = r.config;
    auto mean = [&](std::size_t m, int t, bool A) {
      double x = 0;
      for (const auto& traj : r.trajectories[m]) x += A ? traj[t - 1].A_fro : traj[t - 1].S_fro;
      return x / double(r.trajectories[m].size());
    };
    auto index = [&](const std::string& name) {
      return std::size_t(std::find(c.mixers.begin(), c.mixers.end(), name) - c.mixers.begin());
    };
    const std::size_t lin = index("linear"), dn = index("deltanet"), vla = index("vla");
    double vmax = 0;
    for (const auto& traj : r.trajectories[vla])
      for (const auto& st : traj) vmax = std::max(vmax, st.S_fro);
    std::vector<std::vector<double>> rows;
    for (int t = 1; t <= c.T; ++t) rows.push_back({double(t), mean(lin, t, false), mean(dn, t, false), mean(vla, t, false), mean(vla, t, true)});
    analysis::PlotSpec ps = analysis::plot_spec("||S_t||_F at inference, random inputs (mean over seeds)", "t", "||S_t||_F", true);
    ps.series = {{2, "linear attention"}, {3, "DeltaNet"}, {4, "VLA"}};
    sec.plots.push_back(plot_table(ctx, "state_norms", {"t", "linear_S", "deltanet_S", "vla_S", "vla_A"}, rows, ps,
                                   "Fig. 4 left / Fig. 2(b): ||S_t||_F, mean over seeds 42, 123, 999 (log scale)"));
    analysis::PlotSpec pa = analysis::plot_spec("VLA ||A_t||_F (mean over seeds)", "t", "||A_t||_F");
    pa.series = {{5, "VLA ||A_t||_F"}};
    sec.plots.push_back(plot_table(ctx, "A_norms", {"t", "linear_S", "deltanet_S", "vla_S", "vla_A"}, rows, pa,
                                   "Fig. 4 right: ||A_t||_F of VLA, mean over seeds"));
    const double linT = mean(lin, c.T, false), vT = mean(vla, c.T, false), dT = mean(dn, c.T, false);
    sec.question = "Does linear attention's state grow to ~1600 at T = 1000 while VLA's stays below 15, and does ||A_t||_F decay from "
                   "~56 to ~10?";
    sec.comparisons.push_back(within_factor("linear attention ||S_1000||_F (mean over seeds)", ctx.paper("linear S 1000"), linT, 2));
    auto below = statement("VLA max_t ||S_t||_F (all seeds, t <= 1000)", "< 15", ctx.paper("vla S max").where, fmt_value(vmax, 2),
                           vmax < 15, "< 15 (a bound)");
    below.measured = vmax;
    sec.comparisons.push_back(below);
    auto ratio = within_factor("||S_1000||_F linear / VLA", ctx.paper("ratio"), linT / vT, 2);
    ratio.info = true;  // follows from the two above
    sec.comparisons.push_back(ratio);
    sec.comparisons.push_back(within_abs("VLA ||A_1||_F", ctx.paper("A 1"), mean(vla, 1, true), 0.1 * 56));
    sec.comparisons.push_back(within_factor("VLA ||A_1000||_F", ctx.paper("A 1000"), mean(vla, c.T, true), 2));
    auto dnc = statement("DeltaNet ||S_1000||_F", "bounded, near VLA (line 286)", "Sec. 6.2, line 286", fmt_value(dT, 2), true, "shown");
    dnc.info = true;
    sec.comparisons.push_back(dnc);
    sec.tables.push_back({"norms_at", "Means over seeds 42, 123, 999 (double).", {"quantity", "t = 1", "t = 10", "t = 100", "t = 1000", "max over t, seeds"}, {}});
    auto& nt = sec.tables.back();
    auto max_of = [&](std::size_t m, bool A) {
      double mx = 0;
      for (const auto& traj : r.trajectories[m])
        for (const auto& st : traj) mx = std::max(mx, A ? st.A_fro : st.S_fro);
      return mx;
    };
    for (auto [label, m, A] : {std::tuple{"linear ||S_t||_F", lin, false}, std::tuple{"DeltaNet ||S_t||_F", dn, false},
                               std::tuple{"VLA ||S_t||_F", vla, false}, std::tuple{"VLA ||A_t||_F", vla, true}})
      nt.rows.push_back({label, fmt_value(mean(m, 1, A), 4), fmt_value(mean(m, 10, A), 4), fmt_value(mean(m, 100, A), 4),
                         fmt_value(mean(m, c.T, A), 4), fmt_value(max_of(m, A), 4)});
    sec.verdict = verdict_of(sec.comparisons);
    sec.verdict_rule = "Tolerances of the claims ledger (`fig4-state-norms`, `fig4-A-norm-decay`): linear within a factor 2 of the "
                       "paper's 1630 (input distribution unstated), VLA's maximum below 15 (a bound), ||A_1||_F within 10% of 56, "
                       "||A_1000||_F within a factor 2 of 10; the ratio and DeltaNet are shown, not judged.";
    sec.settings = fmt::format("- studies/fig4 (`vla stability`): d_h = {}, T = {}, seeds {}, precision {}, lambda0 = {}, eps = {}, refresh "
                               "+{} I every {} steps; inputs x_t ~ N(0, I), weights N(0, 1/fan_in), one head, untrained. Every trajectory: "
                               "`data/state_norms.csv`, the study's summary: `data/summary.txt`.\n",
                               c.d_head, c.T, fmt::join(c.seeds, ", "), c.precision, c.base.penalty.lambda0, c.base.penalty.eps,
                               c.base.penalty.refresh_eta, c.base.penalty.refresh_period);
    sec.notes = "The paper does not state its input distribution; the levels depend on it, the ordering (linear >> VLA, DeltaNet) does "
                "not. `vla stability --help` varies d_h, T, precision and the VLA knobs.\n";
  };
  return s;
}

}  // namespace vla::studies
