#pragma once
// Knob: one setting of an options struct as the struct reports it to whatever maps settings to the
// outside (the command line's flags, the JSON of checkpoints and summaries): the field's name, what it
// does, which values it allows, and a reference to the field. The struct lists its knobs once, in a
// `for_each_knob(options, visitor)` next to its definition; its member initialisers are the defaults
// (visiting a default-constructed struct reports them), so no default is written twice.
//
// An enumerated knob names its values through `knob_values(E)`, found by argument-dependent lookup
// next to the enum: {name, value} pairs, the one spelling of each value on the command line and in files.
#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

namespace vla {

// "a, b, c": the names of E's values, as error messages and --help list them.
template <class E> std::string knob_value_names() {
  std::string s;
  for (const auto& [name, value] : knob_values(E{})) s += (s.empty() ? "" : ", ") + std::string(name);
  return s;
}

template <class E> std::string_view knob_value_name(E v) {
  for (const auto& [name, value] : knob_values(E{}))
    if (value == v) return name;
  throw std::logic_error("knob_value_name: a value without a name");
}

// The value named `s`; otherwise std::invalid_argument naming `label` (the parameter) and the names.
template <class E> E parse_knob_value(std::string_view s, std::string_view label) {
  for (const auto& [name, value] : knob_values(E{}))
    if (name == s) return value;
  throw std::invalid_argument(fmt::format("{}: unknown value '{}' (allowed: {})", label, s, knob_value_names<E>()));
}

template <class T> struct Knob {
  using value_type = std::remove_const_t<T>;
  std::string_view name;     // the field's name: its key in JSON, the subject of check()'s message
  std::string_view help;     // what it does, with the paper's or the spec's reference
  T& value;                  // the field in the visited struct
  std::string_view allowed = {};        // the allowed values in words ("a finite number > 0"); enums: their names
  bool (*ok)(value_type) = nullptr;     // whether a value is allowed; nullptr: every value of the type

  // Throws std::invalid_argument "<label>: must be <allowed>, got <value>" if the value is not allowed;
  // label: the parameter as the caller's user knows it (a flag), the field's name by default.
  void check(std::string_view label = {}) const {
    if (!ok || ok(value)) return;
    if constexpr (std::is_enum_v<value_type>)
      throw std::invalid_argument(fmt::format("{}: must be {}, got {}", label.empty() ? name : label, allowed, knob_value_name(value)));
    else
      throw std::invalid_argument(fmt::format("{}: must be {}, got {}", label.empty() ? name : label, allowed, value));
  }
};

// A knob of `value`'s type, const when the visited struct is (for_each_knob on a const struct).
template <class T>
Knob<T> knob(std::string_view name, std::string_view help, T& value, std::string_view allowed = {},
             bool (*ok)(std::remove_const_t<T>) = nullptr) {
  return {name, help, value, allowed, ok};
}

}  // namespace vla
