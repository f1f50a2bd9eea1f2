#include "studies/fig4/stability.hpp"

#include "core/io/csv.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>

namespace vla::studies {

StabilityResult run_stability(const StabilityConfig& cfg) {
  const auto start = std::chrono::steady_clock::now();
  StabilityResult r{cfg, analysis::protocol_trajectories(cfg, cfg.precision), 0.0};
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

std::string summarise_stability(const StabilityResult& r) {
  const auto& c = r.config;
  std::string s = fmt::format(
      "Fig. 4 stability study: d_head = {}, T = {}, seeds {}, precision {}, lambda0 = {}, eps = {}, "
      "refresh every {} (+{} I), inputs x_t ~ N(0, I), weights N(0, 1/fan_in)\n",
      c.d_head, c.T, fmt::join(c.seeds, ","), c.precision, c.base.penalty.lambda0, c.base.penalty.eps,
      c.base.penalty.refresh_period, c.base.penalty.refresh_eta);
  std::vector<int> marks;
  for (int t : {1, 10, 100, 1000, 10000, 100000})
    if (t <= c.T) marks.push_back(t);
  if (marks.back() != c.T) marks.push_back(c.T);
  auto mean_over_seeds = [&](std::size_t m, int t, auto field) {
    double sum = 0;
    for (const auto& traj : r.trajectories[m]) sum += field(traj[t - 1]);
    return sum / double(r.trajectories[m].size());
  };
  s += fmt::format("  {:<10} {:>8}", "quantity", "mixer");
  for (int t : marks) s += fmt::format(" {:>12}", fmt::format("t={}", t));
  s += fmt::format(" {:>12}\n", "max over t");
  auto row = [&](const std::string& label, std::size_t m, auto field) {
    s += fmt::format("  {:<10} {:>8}", label, c.mixers[m]);
    for (int t : marks) s += fmt::format(" {:>12.5g}", mean_over_seeds(m, t, field));
    double mx = 0;
    for (const auto& traj : r.trajectories[m])
      for (const auto& st : traj) mx = std::max(mx, field(st));
    s += fmt::format(" {:>12.5g}\n", mx);
  };
  for (std::size_t m = 0; m < c.mixers.size(); ++m) row("||S_t||_F", m, [](const StepStats& x) { return x.S_fro; });
  for (std::size_t m = 0; m < c.mixers.size(); ++m)
    if (c.mixers[m].rfind("vla", 0) == 0) row("||A_t||_F", m, [](const StepStats& x) { return x.A_fro; });
  s += "  (values are means over seeds; 'max over t' is the largest over all seeds and steps)\n";
  s += fmt::format("  computed in {:.2f} s\n", r.seconds);
  return s;
}

std::string write_stability(const StabilityResult& r, const std::filesystem::path& dir) {
  const auto& c = r.config;
  std::vector<std::string> header{"t", "seed"};
  for (const auto& m : c.mixers) header.push_back(m + "_S_fro");
  for (const auto& m : c.mixers)
    if (m.rfind("vla", 0) == 0) header.push_back(m + "_A_fro");
  io::CsvTable table(header);
  for (std::size_t s = 0; s < c.seeds.size(); ++s)
    for (int t = 1; t <= c.T; ++t) {
      std::vector<double> row{double(t), double(c.seeds[s])};
      for (std::size_t m = 0; m < c.mixers.size(); ++m) row.push_back(r.trajectories[m][s][t - 1].S_fro);
      for (std::size_t m = 0; m < c.mixers.size(); ++m)
        if (c.mixers[m].rfind("vla", 0) == 0) row.push_back(r.trajectories[m][s][t - 1].A_fro);
      table.add_row(row);
    }
  table.write(dir / "state_norms.csv");
  const std::string summary = summarise_stability(r);
  io::write_text_atomically(dir / "summary.txt", summary);
  return summary;
}

}  // namespace vla::studies
