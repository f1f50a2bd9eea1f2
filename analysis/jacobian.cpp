#include "analysis/jacobian.hpp"

#include "analysis/head_stream.hpp"
#include "analysis/plot.hpp"
#include "analysis/rule_zoo.hpp"
#include "analysis/spectral.hpp"
#include "core/io/csv.hpp"
#include "core/parallel/bytes.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace vla::analysis {

void JacobianConfig::validate() const {
  if (d_heads.empty()) throw std::invalid_argument("--d-heads: at least one head dimension is needed");
  for (int d : d_heads)
    if (d < 1) throw std::invalid_argument(fmt::format("--d-heads: must be >= 1, got {}", d));
  if (mixers.empty()) throw std::invalid_argument("--mixers: at least one mixer is needed");
  if (T < 1) throw std::invalid_argument(fmt::format("--T: must be >= 1, got {}", T));
  if (check_steps < 0 || check_steps > T)
    throw std::invalid_argument(fmt::format("--check-steps: must be in [0, T={}], got {}", T, check_steps));
  if (product_T < 1 || product_T > T)
    throw std::invalid_argument(fmt::format("--product-T: must be in [1, T={}], got {}", T, product_T));
  base.penalty.validate();
}

double JacobianSeries::mean_norm() const {
  return closed.empty() ? 0.0 : std::accumulate(closed.begin(), closed.end(), 0.0) / double(closed.size());
}
double JacobianSeries::max_norm() const {
  return closed.empty() ? 0.0 : *std::max_element(closed.begin(), closed.end());
}

namespace {

JacobianSeries one_series(const JacobianConfig& cfg, const std::string& mixer, int d) {
  JacobianSeries s;
  s.mixer = mixer;
  s.d = d;
  const HeadStream stream = random_head_stream(d, cfg.T, cfg.seed);
  with_analysis_rule<Precision<double>>(mixer, cfg.base, [&](auto rule) {
    Mat<double> P = Mat<double>::Identity(d, d);  // (d, d) running product M_1 ... M_t
    LyapunovQR<double> lyap(d);
    drive(rule, stream, [&](int t, auto&, auto&, const StepRecord<double>& rec) {
      const auto& w = rec.writes[0];
      if (!w.exact)
        throw std::invalid_argument(fmt::format("--mixers: {}'s step map dS_t/dS_{{t-1}} is not S -> S M for one (d_h, d_h) M "
                                                "(step {}): the Jacobian analysis does not cover it", mixer, t));
      // The map's matrix: the rule's own M where it carries one (per-channel decays, a window), else
      // decay I - k_read w^T, whose norm has the closed form (Table 2's "closed"; for an M, its SVD).
      const Mat<double> M = w.M.size() ? w.M : step_map(w.k_read, w.w, w.decay);
      const double closed = w.M.size()      ? svd_norm(M)
                            : w.w.size() == d ? rank1_perturbation_norm(w.decay, w.k_read, w.w)
                                              : std::abs(w.decay);
      s.closed.push_back(closed);
      if (t <= cfg.check_steps) {
        const double pw = power_iteration_norm(M), sv = svd_norm(M);
        s.power.push_back(pw);
        s.svd.push_back(sv);
        s.max_rel_disagreement =
            std::max({s.max_rel_disagreement, std::abs(closed - sv) / sv, std::abs(pw - sv) / sv});
      }
      if (t <= cfg.product_T) {
        P = P * M;
        s.product.push_back(svd_norm(P));
      }
      lyap.push(M);
    });
    s.lyapunov = lyap.largest();
  });
  return s;
}

}  // namespace

std::size_t jacobian_units(const JacobianConfig& cfg) {
  cfg.validate();
  return cfg.mixers.size() * cfg.d_heads.size();
}

JacobianSeries run_jacobian_unit(const JacobianConfig& cfg, std::size_t unit) {
  const std::size_t nd = cfg.d_heads.size();
  return one_series(cfg, cfg.mixers.at(unit / nd), cfg.d_heads.at(unit % nd));
}

double jacobian_unit_cost(const JacobianConfig& cfg, std::size_t unit) {
  const double d = cfg.d_heads.at(unit % cfg.d_heads.size());
  return d * d * d;
}

std::vector<JacobianSeries> run_jacobian(const JacobianConfig& cfg) {
  std::vector<JacobianSeries> out;
  for (std::size_t i = 0, n = jacobian_units(cfg); i < n; ++i) out.push_back(run_jacobian_unit(cfg, i));
  return out;
}

std::string encode_series(const JacobianSeries& s) {
  return parallel::ByteWriter().str(s.mixer).i64(s.d).f64s(s.closed).f64s(s.power).f64s(s.svd).f64s(s.product).f64(s.lyapunov)
      .f64(s.max_rel_disagreement).take();
}

JacobianSeries decode_series(const std::string& bytes) {
  parallel::ByteReader in(bytes);
  JacobianSeries s;
  s.mixer = in.str();
  s.d = int(in.i64());
  s.closed = in.f64s();
  s.power = in.f64s();
  s.svd = in.f64s();
  s.product = in.f64s();
  s.lyapunov = in.f64();
  s.max_rel_disagreement = in.f64();
  in.end();
  return s;
}

std::string write_jacobian(const JacobianConfig& cfg, const std::vector<JacobianSeries>& r,
                           const std::filesystem::path& dir) {
  std::vector<std::string> header{"t"};
  for (const auto& s : r) header.push_back(fmt::format("{}_d{}", s.mixer, s.d));
  io::CsvTable steps(header), prod(header);
  for (int t = 1; t <= cfg.T; ++t) {
    std::vector<double> row{double(t)};
    for (const auto& s : r) row.push_back(s.closed[t - 1]);
    steps.add_row(row);
  }
  for (int t = 1; t <= cfg.product_T; ++t) {
    std::vector<double> row{double(t)};
    for (const auto& s : r) row.push_back(s.product[t - 1]);
    prod.add_row(row);
  }
  steps.write(dir / "jacobian_steps.csv");
  prod.write(dir / "jacobian_product.csv");
  io::CsvTable summary({"d_head", "is_v3", "mean_norm", "max_norm", "product_T", "lyapunov", "max_rel_disagreement"});
  std::string text = fmt::format(
      "Jacobian ||M_t||_2 (Sec. 6.2 protocol, seed {}, T = {}, double; three ways on t <= {}):\n"
      "  {:<10} {:>5} {:>12} {:>12} {:>14} {:>12} {:>14}\n",
      cfg.seed, cfg.T, cfg.check_steps, "mixer", "d_h", "mean ||J||", "max ||J||",
      fmt::format("prod T={}", cfg.product_T), "Lyapunov", "3-way max rel");
  for (const auto& s : r) {
    summary.add_row({double(s.d), s.mixer == "vla" ? 1.0 : 0.0, s.mean_norm(), s.max_norm(), s.product.back(),
                     s.lyapunov, s.max_rel_disagreement});
    text += fmt::format("  {:<10} {:>5} {:>12.6g} {:>12.6g} {:>14.4g} {:>12.5g} {:>14.3g}\n", s.mixer, s.d,
                        s.mean_norm(), s.max_norm(), s.product.back(), s.lyapunov, s.max_rel_disagreement);
  }
  summary.write(dir / "jacobian_summary.csv");
  PlotSpec p1 = plot_spec("Per-step Jacobian spectral norm ||dS_t/dS_{t-1}||_2 (closed form)", "step t",
              "||J_t||_2 (log scale)", true, false);
  PlotSpec p2 = plot_spec(fmt::format("Product norm ||J_1 ... J_t||_2 over t <= {}", cfg.product_T), "steps t",
              "||J_1...J_t||_2 (log scale)", true, false);
  p1.extra = "set yrange [0.5:*]\n";  // VLAv3 sits at ~1: keep it off the bottom edge
  p2.extra = "set yrange [0.5:*]\n";
  for (std::size_t i = 0; i < r.size(); ++i) {
    p1.series.push_back({int(i) + 2, header[i + 1]});
    p2.series.push_back({int(i) + 2, header[i + 1]});
  }
  text += plot_csv(dir / "jacobian_steps.csv", dir / "jacobian_steps.png", p1);
  text += plot_csv(dir / "jacobian_product.csv", dir / "jacobian_product.png", p2);
  return text;
}

}  // namespace vla::analysis
