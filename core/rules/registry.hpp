#pragma once
// The mixers the toolkit knows, and the one place that turns a name into a rule object.
// A new rule: add its header to core/rules/, include it here, add a branch to with_rule, and list
// its name in kMixerNames.
#include "core/rules/delta_net.hpp"
#include "core/rules/linear_attention.hpp"
#include "core/rules/mixer_config.hpp"
#include "core/rules/softmax.hpp"
#include "core/rules/vla.hpp"

#include <string>

namespace vla {

inline constexpr std::string_view kMixerNames =
    "vla, vla-v2, vla-rls, vla-fixed-a, vla-no-knorm, linear, deltanet, softmax";

// Calls f(rule) with the rule object for cfg.mixer in precision P.
template <class P, class F> decltype(auto) with_rule(const MixerConfig& cfg, F&& f) {
  const MemoryOptions mem{cfg.renormalise_S, cfg.renorm_threshold};
  if (cfg.is_vla()) {
    VlaOptions o = VlaOptions::preset(cfg.mixer);
    o.penalty = cfg.penalty;
    o.memory = mem;
    return f(VlaRule<P>(o));
  }
  if (cfg.mixer == "linear") return f(LinearAttentionRule<P>(LinearAttentionOptions{{cfg.penalty.eps, mem}, false}));
  if (cfg.mixer == "deltanet") return f(DeltaNetRule<P>(DeltaNetOptions{{cfg.penalty.eps, mem}, cfg.deltanet_gated}));
  if (cfg.mixer == "softmax") return f(SoftmaxRule<P>());
  throw std::invalid_argument(fmt::format("--mixer: unknown mixer '{}' (allowed: {})", cfg.mixer, kMixerNames));
}

}  // namespace vla
