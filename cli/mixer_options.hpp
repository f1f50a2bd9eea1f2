#pragma once
// The mixer's settings on the command line, for every command that builds a mixer (layer-forward,
// stability, jacobian, recovery, precision-atlas, train): the knobs MixerConfig reports
// (core/rules/mixer_config.hpp: name, help, allowed values; the defaults are its member initialisers)
// become flags here, in one place. A bad value is refused while parsing, naming the flag and what is
// allowed (exit 2, before any work).
#include "core/rules/mixer_config.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace vla::cli {

// The flag of each knob that has one. The analyses (jacobian, recovery, precision-atlas, stability) drive
// the rules' own steps on per-token inputs, not the layer, so they leave out --next-latent, which only the
// layer (layer-forward) and training honour. S renormalisation and the DeltaNet gate have none: training has
// no backward for renormalisation (ModelConfig::validate), the atlas sets it per policy
// (--policies renorm --renorm-threshold), and layer-forward takes the gate from its weights (Wg.npy).
inline constexpr std::array<std::pair<std::string_view, std::string_view>, 11> kMixerFlags{{
    {"lambda0", "--lambda0"},
    {"eps", "--eps"},
    {"refresh_period", "--refresh-period"},
    {"refresh_eta", "--refresh"},
    {"delta_policy", "--delta-policy"},
    {"rank", "--rank"},
    {"ridge", "--ridge"},
    {"eps_gamma", "--eps-gamma"},
    {"window", "--window"},
    {"mva_levels", "--mva-levels"},
    {"next_latent", "--next-latent"},
}};

// The flag of knob `name`, or "" if it has none.
inline std::string_view mixer_flag(std::string_view name) {
  for (const auto& [knob, flag] : kMixerFlags)
    if (knob == name) return flag;
  return {};
}

// Adds a flag for every knob of c that has one, except the knobs named in `without` (those the command
// cannot honour; the caller says why). c must outlive the parse (the flags write into it).
inline void add_mixer_options(CLI::App& app, MixerConfig& c, std::initializer_list<std::string_view> without = {}) {
  for (auto name : without)
    if (mixer_flag(name).empty()) throw std::logic_error(fmt::format("add_mixer_options: no flag for knob '{}'", name));
  for_each_knob(c, [&](auto k) {
    const std::string_view flag = mixer_flag(k.name);
    if (flag.empty() || std::find(without.begin(), without.end(), k.name) != without.end()) return;
    using T = typename decltype(k)::value_type;
    if constexpr (std::is_same_v<T, bool>) {  // a switch: present means on
      app.add_flag_function(std::string(flag), [k](std::int64_t n) { k.value = n > 0; }, std::string(k.help));
    } else if constexpr (std::is_enum_v<T>) {
      std::string names = knob_value_names<T>();
      names.erase(std::remove(names.begin(), names.end(), ' '), names.end());
      app.add_option_function<std::string>(
             std::string(flag), [k, flag](const std::string& s) { k.value = parse_knob_value<T>(s, flag); }, std::string(k.help))
          ->type_name(fmt::format("TEXT:{{{}}}", names))
          ->default_str(std::string(knob_value_name(k.value)));
    } else {
      app.add_option_function<T>(std::string(flag), [k, flag](const T& x) { k.value = x; k.check(flag); }, std::string(k.help))
          ->default_str(fmt::format("{}", k.value));
    }
  });
}

}  // namespace vla::cli
