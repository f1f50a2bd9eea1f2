#include "analysis/mva_decomposition.hpp"

#include "analysis/chunked_exactness.hpp"  // chunk_test_stream
#include "analysis/head_stream.hpp"
#include "core/rules/mva/rule.hpp"

#include <cmath>
#include <stdexcept>

namespace vla::analysis {

namespace {

// ||K^(c)||_F / ||K||_F of the rule (c levels, the selection) over one stream, in precision P.
template <class P> double residual_ratio(const HeadStream& s, int levels, bool hard) {
  double e2 = 0, k2 = 0;
  drive(MvaRule<P>(MvaOptions{levels, hard}), s, [&](int t, const auto&, const auto&, const auto& rec) {
    e2 += rec.stats[0].e_norm * rec.stats[0].e_norm;
    k2 += s.k.col(t - 1).squaredNorm();
  });
  return std::sqrt(e2 / k2);
}

template <class P> void measure(const MvaDecompositionConfig& cfg, const std::string& precision, std::vector<MvaDecompositionPoint>& out) {
  for (const bool hard : {true, false})
    for (const int n : cfg.ns)
      for (int c = 1; c <= cfg.max_levels; ++c) {
        double sum = 0;
        for (const auto seed : cfg.seeds) sum += residual_ratio<P>(chunk_test_stream(cfg.d, n, seed), c, hard);
        out.push_back({precision, hard ? "one-hot" : "softmax", n, c, sum / double(cfg.seeds.size()),
                       std::pow(double(n - cfg.d) / double(n), c)});
      }
}

}  // namespace

std::vector<MvaDecompositionPoint> mva_decomposition_error(const MvaDecompositionConfig& cfg) {
  if (cfg.d < 1 || cfg.max_levels < 1 || cfg.seeds.empty())
    throw std::invalid_argument("mva_decomposition_error: d, max_levels >= 1 and at least one seed");
  for (const int n : cfg.ns)
    if (n <= cfg.d) throw std::invalid_argument("mva_decomposition_error: every n must exceed m = d (the bound (n - m)/n is then > 0)");
  std::vector<MvaDecompositionPoint> out;
  for (const auto& p : cfg.precisions) {
    if (p == "mp50") measure<Precision<mp50>>(cfg, p, out);
    else if (p == "double") measure<Precision<double>>(cfg, p, out);
    else throw std::invalid_argument("mva_decomposition_error: precisions are mp50 and double, got '" + p + "'");
  }
  return out;
}

}  // namespace vla::analysis
