#include "analysis/write_direction.hpp"

#include "analysis/recovery.hpp"
#include "analysis/rule_zoo.hpp"

#include <random>

namespace vla::analysis {

double residual_write_correlation(const std::string& mixer, const MixerConfig& cfg, int d, double rho,
                                  std::uint64_t seed) {
  const Mat<double> K = make_keys(KeyKind::Correlated, d, 2, rho, seed);  // (d, 2)
  std::mt19937_64 gen(seed + 2);
  std::normal_distribution<double> g(0.0, 1.0);
  Mat<double> V(d, 2);  // (d, 2)
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < d; ++j) V(j, i) = g(gen);
  const HeadStream stream = recovery_stream(K, V, seed);
  double ratio = kNotApplicable;
  with_analysis_rule<Precision<double>>(mixer, cfg, [&](auto rule) {
    Vec<double> k1;
    drive(rule, stream, [&](int t, auto&, auto&, const StepRecord<double>& rec) {
      const auto& w = rec.writes[0];
      if (t == 1) { k1 = w.k_read; return; }
      if (w.w.size() == 0) return;  // no residual write direction (linear attention)
      ratio = std::abs(k1.dot(unit(w.w))) / std::abs(k1.dot(w.k_read));
    });
  });
  return ratio;
}

}  // namespace vla::analysis
