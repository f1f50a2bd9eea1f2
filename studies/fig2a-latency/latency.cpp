#include "studies/fig2a-latency/latency.hpp"

#include "core/io/csv.hpp"
#include "core/io/provenance.hpp"
#include "core/layers/mixer_layer.hpp"
#include "core/rules/registry.hpp"
#include "studies/mqar_grid.hpp"
#include "studies/outputs.hpp"
#include "studies/run_store.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

namespace vla::studies {

namespace fs = std::filesystem;

LatencyConfig latency_config(const StudyOptions& o) {
  LatencyConfig c;
  if (o.quick) {
    c.T = {64, 128, 256};
    c.reps = 1;
  }
  return c;
}

namespace {

double median_forward_ms(const LatencyConfig& c, const std::string& mixer, int T) {
  MixerConfig mc;
  mc.mixer = mixer;
  return with_precision(c.precision, [&](auto p) {
    using P = decltype(p);
    return with_rule<P>(mc, [&](auto rule) {
      using Rule = decltype(rule);
      using S = typename Rule::storage_t;
      const LayerShape shape{c.d_model, c.d_head, c.heads, 1};
      MixerLayer<Rule> layer(shape, rule, random_weights<S>(shape, Rule::needs, 42));
      std::mt19937_64 g(43);
      std::normal_distribution<double> n(0, 1);
      std::vector<Mat<S>> X(c.batch, Mat<S>(T, c.d_model));
      for (auto& x : X)
        for (Eigen::Index j = 0; j < x.cols(); ++j)
          for (Eigen::Index i = 0; i < x.rows(); ++i) x(i, j) = S(n(g));
      std::vector<double> ms;
      for (int r = 0; r <= c.reps; ++r) {  // the first forward warms caches and the allocator: not timed
        const auto t0 = std::chrono::steady_clock::now();
        const auto y = layer.forward(X);
        const double dt = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (r > 0) ms.push_back(dt);
        if (!std::isfinite(double(y[0](T - 1, 0)))) throw std::runtime_error(fmt::format("latency: {} produced a non-finite output", mixer));
      }
      std::sort(ms.begin(), ms.end());
      return ms[ms.size() / 2];
    });
  });
}

}  // namespace

Latency cpu_latency(const StudyContext& ctx) {
  const LatencyConfig c = latency_config(ctx.opt);
  const auto prov = io::provenance("cpu");
  // Timings belong to a build and a machine: both are in the key.
  const nlohmann::json key{{"mixers", c.mixers}, {"T", c.T}, {"batch", c.batch}, {"heads", c.heads}, {"d_head", c.d_head},
                           {"d_model", c.d_model}, {"reps", c.reps}, {"precision", c.precision}, {"git", prov["git"]},
                           {"host", prov["host"]}};
  const fs::path dir = RunStore(ctx.store).cache_dir("latency", key, "cpu"), csv = dir / "latency.csv";
  Latency l;
  l.T = c.T;
  l.where = fmt::format("CPU ({}), one mixer layer in {}, d = {}, H = {}, d_h = {}, B = {}, median of {} forwards", prov.value("host", "?"),
                        c.precision, c.d_model, c.heads, c.d_head, c.batch, c.reps);
  l.file = csv.string();
  if (!fs::exists(csv)) {
    std::vector<std::string> header{"T"};
    for (const auto& m : c.mixers) header.push_back(m + "_ms");
    io::CsvTable t(header);
    for (int T : c.T) {
      std::vector<double> row{double(T)};
      for (const auto& m : c.mixers) row.push_back(median_forward_ms(c, m, T));
      t.add_row(row);
    }
    t.write(csv);
  }
  const auto d = read_csv(csv);
  for (const auto& m : c.mixers) l.ms[m] = d.column(m + "_ms");
  return l;
}

std::optional<Latency> gpu_latency(const StudyContext& ctx) {
  for (const char* name : {"latency-8-4-32.csv", "bench-8-4-32.csv"}) {
    const fs::path f = ctx.opt.out / "gpu-bench" / name;
    if (!fs::exists(f)) continue;
    const auto d = read_csv(f);
    Latency l;
    for (double t : d.column("T")) l.T.push_back(int(t));
    for (const char* m : {"softmax", "linear", "deltanet", "vla"}) l.ms[m] = d.column(std::string(m) + "_ms");
    l.where = fmt::format("GPU (`vla bench attention`: fused kernels and the toolkit's softmax, fp32, B = {}, H = {}, d_h = {}, "
                          "CUDA-event medians)", d.rows[0][0], d.rows[0][1], d.rows[0][2]);
    l.file = f.string();
    return l;
  }
  return std::nullopt;
}

std::vector<std::vector<double>> per_T_rows(const Latency& l, const std::vector<std::string>& mixers,
                                            const std::function<double(const std::string&, std::size_t)>& f) {
  std::vector<std::vector<double>> rows;
  for (std::size_t i = 0; i < l.T.size(); ++i) {
    std::vector<double> r{double(l.T[i])};
    for (const auto& m : mixers) r.push_back(f(m, i));
    rows.push_back(r);
  }
  return rows;
}

TextTable per_T_table(const std::string& name, const std::string& caption, const std::vector<std::string>& mixers,
                      const std::vector<std::vector<double>>& rows, const std::function<std::string(double)>& cell) {
  TextTable t{name, caption, {"T"}, {}};
  for (const auto& m : mixers) t.header.push_back(paper_name(m));
  for (const auto& r : rows) {
    t.rows.push_back({fmt::format("{:.0f}", r[0])});
    for (std::size_t k = 1; k < r.size(); ++k) t.rows.back().push_back(cell(r[k]));
  }
  return t;
}

double loglog_slope(const std::vector<int>& T, const std::vector<double>& ms, std::size_t from) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  int n = 0;
  for (std::size_t i = from; i < T.size(); ++i) {
    if (!(ms[i] > 0)) continue;
    const double x = std::log(double(T[i])), y = std::log(ms[i]);
    sx += x; sy += y; sxx += x * x; sxy += x * y;
    ++n;
  }
  return n < 2 ? kNaN : (n * sxy - sx * sy) / (n * sxx - sx * sx);
}

double crossover(const std::vector<int>& T, const std::vector<double>& ours, const std::vector<double>& theirs) {
  double prev_t = kNaN, prev_r = kNaN;
  for (std::size_t i = 0; i < T.size(); ++i) {
    if (!(ours[i] > 0) || !(theirs[i] > 0)) continue;
    const double r = std::log(ours[i] / theirs[i]), t = std::log(double(T[i]));
    if (r < 0) return std::isnan(prev_r) ? double(T[i]) : std::exp(prev_t + (t - prev_t) * prev_r / (prev_r - r));
    prev_t = t;
    prev_r = r;
  }
  return kNaN;
}

}  // namespace vla::studies
