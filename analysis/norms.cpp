#include "analysis/norms.hpp"

#include "analysis/plot.hpp"
#include "core/io/csv.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace vla::analysis {

double NormResult::mean_at(const std::string& mixer, int t, char field) const {
  double sum = 0;
  int n = 0;
  for (const auto& s : series)
    if (s.mixer == mixer) {
      sum += field == 'A' ? s.A[t - 1] : s.S[t - 1];
      ++n;
    }
  return n ? sum / n : std::nan("");
}

double NormResult::max_excess(const std::string& mixer) const {
  double m = -std::numeric_limits<double>::infinity();
  for (const auto& s : series)
    if (s.mixer == mixer) m = std::max(m, s.max_bound_excess);
  return m;
}

NormResult run_norms(const NormConfig& cfg) {
  const ProtocolTrajectories runs = protocol_trajectories(cfg, Precision<double>::name());
  NormResult r{cfg, {}};
  for (std::size_t m = 0; m < cfg.mixers.size(); ++m)
    for (std::size_t k = 0; k < cfg.seeds.size(); ++k) {
      NormSeries s{cfg.mixers[m], cfg.seeds[k], {}, {}, {}, -std::numeric_limits<double>::infinity()};
      double bound = 0;  // ||S_0||_F = 0
      for (const StepStats& st : runs[m][k]) {
        bound += st.e_norm;  // eq. 13: sum_{s<=t} ||e_s||
        s.S.push_back(st.S_fro);
        s.A.push_back(st.A_fro);
        s.bound.push_back(bound);
        if (bound > 0) s.max_bound_excess = std::max(s.max_bound_excess, (st.S_fro - bound) / bound);
      }
      r.series.push_back(std::move(s));
    }
  return r;
}

std::string write_norms(const NormResult& r, const std::filesystem::path& dir) {
  const auto& c = r.config;
  std::vector<std::string> hs{"t"}, ha{"t"};
  for (const auto& m : c.mixers) hs.push_back(m + "_S_fro");
  for (const auto& m : c.mixers)
    if (m.rfind("vla", 0) == 0) ha.push_back(m + "_A_fro");
  io::CsvTable S(hs), A(ha);
  for (int t = 1; t <= c.T; ++t) {
    std::vector<double> rs{double(t)}, ra{double(t)};
    for (const auto& m : c.mixers) {
      rs.push_back(r.mean_at(m, t, 'S'));
      if (m.rfind("vla", 0) == 0) ra.push_back(r.mean_at(m, t, 'A'));
    }
    S.add_row(rs);
    A.add_row(ra);
  }
  S.write(dir / "state_norms.csv");
  std::string text = fmt::format("Norm trajectories (Sec. 6.2 protocol, d_h = {}, T = {}, seeds {}, double, mean over seeds):\n",
                                 c.d_head, c.T, fmt::join(c.seeds, ","));
  for (const auto& m : c.mixers)
    text += fmt::format("  {:<18} ||S_T||_F = {:<10.5g} max_t (||S_t|| - bound_t)/bound_t = {:.3g} (eq. 13 holds iff <= 0)\n",
                        m, r.mean_at(m, c.T, 'S'), r.max_excess(m));
  PlotSpec ps = plot_spec(fmt::format("||S_t||_F, d_h = {}, mean over {} seeds", c.d_head, c.seeds.size()), "token t",
              "||S_t||_F (log scale)", true, false);
  for (std::size_t i = 0; i < c.mixers.size(); ++i) ps.series.push_back({int(i) + 2, c.mixers[i]});
  text += plot_csv(dir / "state_norms.csv", dir / "state_norms.png", ps);
  if (ha.size() > 1) {
    A.write(dir / "A_norms.csv");
    for (const auto& m : c.mixers)
      if (m.rfind("vla", 0) == 0)
        text += fmt::format("  {:<18} ||A_1||_F = {:.5g} -> ||A_T||_F = {:.5g}\n", m, r.mean_at(m, 1, 'A'),
                            r.mean_at(m, c.T, 'A'));
    PlotSpec pa = plot_spec("||A_t||_F (VLA inverse penalty)", "token t", "||A_t||_F (log scale)", true, false);
    for (std::size_t i = 1; i < ha.size(); ++i) pa.series.push_back({int(i) + 1, ha[i]});
    text += plot_csv(dir / "A_norms.csv", dir / "A_norms.png", pa);
  }
  return text;
}

}  // namespace vla::analysis
