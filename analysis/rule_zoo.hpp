#pragma once
// The rules the analyses compare: every mixer of core/rules/registry.hpp but softmax, plus configurations
// the registry does not name but the paper discusses (each analysis may refuse a rule it cannot measure,
// e.g. the Jacobian one whose step map is not a single right factor, or restrict itself, as recovery):
//   "rls-classical"  classical RLS (Table 5 / Sec. 7.1): vla-rls gain alpha = A_{t-1}k/(1+k^T A_{t-1} k),
//                    penalty direction u = k_hat itself (PenaltySource::Key, scale 1), so that
//                    A_t = (lambda0 I + sum k_hat k_hat^T)^-1 exactly (no refresh).
//   "vla-key"        Alg. 1 (VLAv3) with u = k_hat / sqrt(d_h) (PenaltySource::Key): the whitening regime.
//   "linear-normalised"  linear attention writing v k_hat^T (Remark 1's target).
#include "core/rules/registry.hpp"

#include <algorithm>

namespace vla::analysis {

inline constexpr std::string_view kAnalysisRuleNames =
    "every mixer but softmax (vla list mixers), and vla-key, rls-classical, linear-normalised";

// Calls f(rule) (f returns void). Softmax is refused: it has no fixed-size memory S to analyse.
template <class P, class F> void with_analysis_rule(const std::string& name, const MixerConfig& base, F&& f) {
  MixerConfig cfg = base;
  const MemoryOptions mem{cfg.renormalise_S, cfg.renorm_threshold};
  if (name == "rls-classical" || name == "vla-key") {
    VlaOptions o = VlaOptions::preset(name == "rls-classical" ? "vla-rls" : "vla");
    o.penalty = cfg.penalty;
    o.penalty_source = PenaltySource::Key;
    if (name == "rls-classical") { o.penalty_scale = 1.0; o.penalty.refresh_period = 0; }
    o.memory = mem;
    f(VlaRule<P>(o));
    return;
  }
  if (name == "linear-normalised") {
    f(LinearAttentionRule<P>(LinearAttentionOptions{{cfg.penalty.eps, mem}, true}));
    return;
  }
  if (name == "softmax")
    throw std::invalid_argument("--mixers: softmax has no fixed-size memory to analyse");
  cfg.mixer = name;
  if (std::find(Rules::kNames.begin(), Rules::kNames.end(), name) == Rules::kNames.end())
    throw std::invalid_argument(fmt::format("--mixers: unknown rule '{}' (allowed: {})", name, kAnalysisRuleNames));
  with_rule<P>(cfg, [&](auto rule) {
    if constexpr (!std::is_same_v<decltype(rule), SoftmaxRule<P>>) f(std::move(rule));  // refused above
  });
}

}  // namespace vla::analysis
