#include "analysis/precision_atlas.hpp"

#include "analysis/plot.hpp"
#include "analysis/rule_zoo.hpp"
#include "core/io/csv.hpp"
#include "core/parallel/bytes.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace vla::analysis {

void AtlasConfig::validate() const {
  if (d_head < 1) throw std::invalid_argument(fmt::format("--d-head: must be >= 1, got {}", d_head));
  if (T < 1) throw std::invalid_argument(fmt::format("--T: must be >= 1, got {}", T));
  if (mixers.empty() || precisions.empty() || policies.empty())
    throw std::invalid_argument("--mixers/--precisions/--policies: none may be empty");
  for (const auto& p : policies) apply_policy(base, p, renorm_threshold);
  for (const auto& p : precisions) with_precision_in<AtlasPrecisions>(p, "--precisions", [](auto) {});
  base.penalty.validate();
}

MixerConfig apply_policy(MixerConfig cfg, const std::string& policy, double renorm_threshold) {
  if (policy == "clamp") {
    cfg.penalty.policy = DeltaPolicy::Clamp;
  } else if (policy == "skip") {
    cfg.penalty.policy = DeltaPolicy::SkipAddEps;
  } else if (policy == "no-refresh") {
    cfg.penalty.refresh_period = 0;
  } else if (policy == "renorm") {
    if (!(renorm_threshold > 0)) throw std::invalid_argument("--renorm-threshold: must be > 0");
    cfg.renormalise_S = true;
    cfg.renorm_threshold = renorm_threshold;
  } else {
    throw std::invalid_argument(
        fmt::format("--policies: unknown policy '{}' (allowed: clamp, skip, no-refresh, renorm)", policy));
  }
  return cfg;
}

double AtlasCell::max_out_err() const {
  double m = 0;
  for (double e : out_err) m = std::max(m, std::isnan(e) ? std::numeric_limits<double>::infinity() : e);
  return m;
}

namespace {
// Whether rule m runs with S renormalisation: the rules whose own decay or normalised step bounds S
// (FALCON's, the gated and slot rules) refuse it, naming --renormalise; the atlas then has no renorm cell
// for them rather than an error.
bool takes_renormalisation(const std::string& m, const AtlasConfig& cfg) {
  try {
    with_analysis_rule<Precision<double>>(m, apply_policy(cfg.base, "renorm", cfg.renorm_threshold), [](auto) {});
    return true;
  } catch (const std::invalid_argument& e) {
    if (std::string(e.what()).find("--renormalise") == std::string::npos) throw;
    return false;
  }
}
}  // namespace

std::vector<AtlasUnit> atlas_units(const AtlasConfig& cfg) {
  cfg.validate();
  std::vector<AtlasUnit> units;
  for (const auto& m : cfg.mixers) {
    const bool vla = m.rfind("vla", 0) == 0 || m == "rls-classical";
    for (const auto& pol : cfg.policies)  // only renorm touches non-VLA rules
      if (vla || pol == cfg.policies.front() || (pol == "renorm" && takes_renormalisation(m, cfg))) units.push_back({m, pol});
  }
  return units;
}

std::vector<AtlasCell> run_atlas_unit(const AtlasConfig& cfg, const AtlasUnit& u) {
  const HeadStream stream = random_head_stream(cfg.d_head, cfg.T, cfg.seed);
  const double inf = std::numeric_limits<double>::infinity();
  const std::string& m = u.mixer;
  const std::string& pol = u.policy;
  const bool vla = m.rfind("vla", 0) == 0 || m == "rls-classical";
  const MixerConfig mc = apply_policy(cfg.base, pol, cfg.renorm_threshold);
  const AtlasTrajectory ref = atlas_trajectory_in<AtlasReference>(m, mc, stream);
  std::vector<AtlasCell> cells;
  for (const auto& p : cfg.precisions) {
    const AtlasTrajectory run = atlas_trajectory(p, m, mc, stream);
    AtlasCell c{m, vla ? pol : (pol == "renorm" ? pol : "default"), p, {}, {}, run.first_nonfinite,
                run.first_A_not_pd, run.guard_fires, ref.guard_fires, kNotApplicable, run.first_nonfinite_what};
    for (int t = 0; t < cfg.T; ++t) {
      const bool bad = run.first_nonfinite && t + 1 >= run.first_nonfinite;
      const double on = ref.out[t].norm(), sn = ref.S[t].norm();
      c.out_err.push_back(bad ? inf : (run.out[t] - ref.out[t]).norm() / (on > 0 ? on : 1.0));
      c.S_err.push_back(bad ? inf : (run.S[t] - ref.S[t]).norm() / (sn > 0 ? sn : 1.0));
      if (!std::isnan(run.A_min_eig[t]))
        c.min_A_eig = std::isnan(c.min_A_eig) ? run.A_min_eig[t] : std::min(c.min_A_eig, run.A_min_eig[t]);
    }
    cells.push_back(std::move(c));
  }
  return cells;
}

std::vector<AtlasCell> run_atlas(const AtlasConfig& cfg) {
  std::vector<AtlasCell> cells;
  for (const auto& u : atlas_units(cfg))
    for (auto& c : run_atlas_unit(cfg, u)) cells.push_back(std::move(c));
  return cells;
}

std::string encode_cells(const std::vector<AtlasCell>& cells) {
  parallel::ByteWriter w;
  w.u64(cells.size());
  for (const auto& c : cells)
    w.str(c.mixer).str(c.policy).str(c.precision).f64s(c.out_err).f64s(c.S_err).i64(c.first_nonfinite).i64(c.first_A_not_pd)
        .i64(c.guard_fires).i64(c.ref_guard_fires).f64(c.min_A_eig).str(c.first_nonfinite_what);
  return w.take();
}

std::vector<AtlasCell> decode_cells(const std::string& bytes) {
  parallel::ByteReader in(bytes);
  std::vector<AtlasCell> cells(in.u64());
  for (auto& c : cells) {
    c.mixer = in.str();
    c.policy = in.str();
    c.precision = in.str();
    c.out_err = in.f64s();
    c.S_err = in.f64s();
    c.first_nonfinite = int(in.i64());
    c.first_A_not_pd = int(in.i64());
    c.guard_fires = int(in.i64());
    c.ref_guard_fires = int(in.i64());
    c.min_A_eig = in.f64();
    c.first_nonfinite_what = in.str();
  }
  in.end();
  return cells;
}

std::string write_atlas(const AtlasConfig& cfg, const std::vector<AtlasCell>& cells, const std::filesystem::path& dir) {
  std::string text = fmt::format(
      "Precision failure atlas (Sec. 6.2 protocol, d_h = {}, T = {}, seed {}; errors relative to mp50, same rule and policy):\n"
      "  {:<10} {:<10} {:<15} {:>11} {:>11} {:>11} {:>12} {:>10} {:>8} {:>12}\n",
      cfg.d_head, cfg.T, cfg.seed, "mixer", "policy", "precision", "out err T", "max out err", "S err T",
      "nonfinite", "A not PD", "guards", "min eig A");
  io::CsvTable summary({"mixer_index", "policy_index", "precision_index", "out_err_T", "max_out_err", "S_err_T",
                        "first_nonfinite", "first_A_not_pd", "guard_fires", "ref_guard_fires", "min_A_eig"});
  auto index_of = [](const std::vector<std::string>& v, const std::string& s) {
    for (std::size_t i = 0; i < v.size(); ++i)
      if (v[i] == s) return double(i);
    return -1.0;
  };
  for (const auto& c : cells) {
    text += fmt::format("  {:<10} {:<10} {:<15} {:>11.3e} {:>11.3e} {:>11.3e} {:>12} {:>10} {:>8} {:>12.4g}\n", c.mixer,
                        c.policy, c.precision, c.final_out_err(), c.max_out_err(), c.S_err.back(),
                        c.first_nonfinite ? fmt::format("{} ({})", c.first_nonfinite, c.first_nonfinite_what) : "never",
                        c.first_A_not_pd ? fmt::format("{}", c.first_A_not_pd) : "never", c.guard_fires, c.min_A_eig);
    summary.add_row({index_of(cfg.mixers, c.mixer), index_of(cfg.policies, c.policy), index_of(cfg.precisions, c.precision),
                     c.final_out_err(), c.max_out_err(), c.S_err.back(), double(c.first_nonfinite),
                     double(c.first_A_not_pd), double(c.guard_fires), double(c.ref_guard_fires), c.min_A_eig});
  }
  text += "  (mixer/policy/precision indices in atlas_summary.csv follow the orders printed above; 'default' = policy index -1)\n";
  summary.write(dir / "atlas_summary.csv");
  // One error-vs-t plot per mixer for the first policy, every format on it (precision-fp16-bf16's figure).
  for (const auto& m : cfg.mixers) {
    std::vector<std::string> header{"t"};
    std::vector<const AtlasCell*> cols;
    for (const auto& c : cells)
      if (c.mixer == m && (c.policy == cfg.policies.front() || c.policy == "default")) {
        header.push_back(c.precision);
        cols.push_back(&c);
      }
    if (cols.empty()) continue;
    io::CsvTable t(header);
    for (int s = 0; s < cfg.T; ++s) {
      std::vector<double> row{double(s + 1)};
      for (auto* c : cols) row.push_back(std::isfinite(c->out_err[s]) ? c->out_err[s] : std::nan(""));
      t.add_row(row);
    }
    const auto stem = fmt::format("precision_{}", m);
    t.write(dir / (stem + ".csv"));
    PlotSpec ps = plot_spec(fmt::format("{}: output error vs mp50 (d_h = {}, policy {})", m, cfg.d_head,
                                        cols.front()->policy),
                            "token t", "||o_t - o_t^{mp50}|| / ||o_t^{mp50}|| (log scale)", true);
    for (std::size_t i = 0; i < cols.size(); ++i) ps.series.push_back({int(i) + 2, header[i + 1]});
    text += plot_csv(dir / (stem + ".csv"), dir / (stem + ".png"), ps);
  }
  return text;
}

}  // namespace vla::analysis
