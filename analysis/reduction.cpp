#include "analysis/reduction.hpp"

#include "analysis/recovery.hpp"
#include "analysis/rule_zoo.hpp"

#include <random>

namespace vla::analysis {

namespace {
Mat<double> final_state(const std::string& mixer, const MixerConfig& cfg, const HeadStream& s, double* alpha_dev) {
  Mat<double> S;
  with_analysis_rule<Precision<double>>(mixer, cfg, [&](auto rule) {
    drive(rule, s, [&](int t, auto& state, auto&, const StepRecord<double>& rec) {
      const auto& w = rec.writes[0];
      if (alpha_dev && w.w.size()) *alpha_dev = std::max(*alpha_dev, (w.w - w.k_read).cwiseAbs().maxCoeff());
      if (t == s.T) S = state.memory.S(0);
    });
  });
  return S;
}
}  // namespace

ReductionResult remark1_reduction(int d, int T, std::uint64_t seed, const MixerConfig& cfg) {
  ReductionResult r;
  const HeadStream random = random_head_stream(d, T, seed);
  const Mat<double> a = final_state("vla-fixed-a", cfg, random, &r.max_alpha_dev);
  const Mat<double> b = final_state("linear-normalised", cfg, random, nullptr);
  r.S_dev_random = (a - b).norm() / b.norm();
  std::mt19937_64 gen(seed + 2);
  std::normal_distribution<double> g(0.0, 1.0);
  Mat<double> V(d, d);  // (d, n = d)
  for (int i = 0; i < d; ++i)
    for (int j = 0; j < d; ++j) V(j, i) = g(gen);
  const HeadStream ortho = recovery_stream(make_keys(KeyKind::Orthonormal, d, d, 0.0, seed), V, seed);
  const Mat<double> c = final_state("vla-fixed-a", cfg, ortho, nullptr);
  const Mat<double> e = final_state("linear-normalised", cfg, ortho, nullptr);
  r.S_dev_orthonormal = (c - e).norm() / e.norm();
  return r;
}

}  // namespace vla::analysis
