#pragma once
// The mixers the toolkit knows: one list of rules, and everything derived from it (the name -> rule
// dispatch, the list of mixer names, what projections a mixer needs). A rule joins with its folder
// (core/rules/<rule>/, see memory_rule.hpp) and one entry in `Rules` below.
#include "core/rules/mixer_config.hpp"

#include "core/rules/delta/rule.hpp"
#include "core/rules/deltanet/rule.hpp"
#include "core/rules/falcon2/rule.hpp"
#include "core/rules/falcon2a/rule.hpp"
#include "core/rules/falcon3/rule.hpp"
#include "core/rules/falcon3a/rule.hpp"
#include "core/rules/gated_deltanet/rule.hpp"
#include "core/rules/gla/rule.hpp"
#include "core/rules/gsa/rule.hpp"
#include "core/rules/linear/rule.hpp"
#include "core/rules/mamba2/rule.hpp"
#include "core/rules/metala/rule.hpp"
#include "core/rules/mva/rule.hpp"
#include "core/rules/retnet/rule.hpp"
#include "core/rules/softmax/rule.hpp"
#include "core/rules/vla/rule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>
#include <string_view>

namespace vla {

// A list of rule templates (each a class template over the Precision). Every name of every rule, in
// list order, and the rule a name selects.
template <template <class> class... Rule> struct RuleList {
  static constexpr std::size_t kCount = (Rule<Precision<double>>::names.size() + ...);
  static constexpr std::array<std::string_view, kCount> kNames = [] {
    std::array<std::string_view, kCount> out{};
    std::size_t i = 0;
    ((std::ranges::copy(Rule<Precision<double>>::names, out.begin() + i), i += Rule<Precision<double>>::names.size()), ...);
    return out;
  }();

  // "a, b, c": the names for --help texts and errors, built at compile time.
  static constexpr std::size_t kJoinedSize = [] {
    std::size_t n = 2 * (kCount - 1);
    for (const auto s : kNames) n += s.size();
    return n;
  }();
  static constexpr std::array<char, kJoinedSize> kJoined = [] {
    std::array<char, kJoinedSize> out{};
    std::size_t i = 0;
    for (std::size_t j = 0; j < kCount; ++j) {
      if (j) { out[i++] = ','; out[i++] = ' '; }
      for (const char c : kNames[j]) out[i++] = c;
    }
    return out;
  }();

  // Calls f(rule) with the rule named cfg.mixer, built from cfg, in precision P.
  template <class P, class F> static decltype(auto) with(const MixerConfig& cfg, F&& f) { return with_first<P, Rule...>(cfg, f); }

 private:
  template <class P, template <class> class First, template <class> class... Rest, class F>
  static decltype(auto) with_first(const MixerConfig& cfg, F& f) {
    using R = First<P>;
    for (const auto n : R::names)
      if (n == cfg.mixer) return f(R::from_config(cfg));
    if constexpr (sizeof...(Rest) > 0) return with_first<P, Rest...>(cfg, f);
    else throw std::invalid_argument(fmt::format("--mixer: unknown mixer '{}' (allowed: {})", cfg.mixer,
                                                 std::string_view(kJoined.data(), kJoined.size())));
  }
};

// The rules, in the order --help lists them.
using Rules = RuleList<VlaRule, LinearAttentionRule, DeltaNetRule, SoftmaxRule, RetNetRule, Mamba2Rule, DeltaRule, GatedDeltaNetRule,
                       GlaRule, Falcon2Rule, Falcon2aRule, Falcon3Rule, Falcon3aRule, MetaLaRule, GsaRule,
                       MvaRule>;

// Every mixer name: "vla, vla-v2, ..., softmax".
inline constexpr std::string_view kMixerNames{Rules::kJoined.data(), Rules::kJoined.size()};

// Calls f(rule) with the rule object for cfg.mixer in precision P; throws naming --mixer and the
// allowed names for an unknown one.
template <class P, class F> decltype(auto) with_rule(const MixerConfig& cfg, F&& f) { return Rules::with<P>(cfg, f); }

// The projections the mixer cfg.mixer reads (its rule's Needs).
inline Needs rule_needs(const MixerConfig& cfg) {
  return with_rule<Precision<double>>(cfg, [](const auto& r) { return std::decay_t<decltype(r)>::needs; });
}

}  // namespace vla
