#pragma once
// Lists on the command line (--seeds 1,2,3, --mixers vla,linear, --T 1024,4096, ...). Every list flag
// of every command is added through add_list_option, so that each refuses the same malformed lists
// while parsing, naming the flag (exit 2, before any work):
//   - an empty list (--seeds "" or --seeds=),
//   - an empty element ("1,,2", a leading or a trailing comma; spaces around an element are ignored),
//   - an element that is not of the list's type (a seed of "-1" or "x"), or, where the flag lists its
//     names, not one of them,
//   - a value given twice: every list of the toolkit is a set (a seed, a mixer or a precision twice
//     would run the same thing twice, count it twice in a mean, or write one folder twice).
// Values are separated by commas; the flag may also be repeated (--seeds 1 --seeds 2 is --seeds 1,2).
#include "core/io/escape.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace vla::cli {

// The value of one list element in words, for the messages.
template <class T> constexpr const char* list_element_kind() {
  if constexpr (std::is_same_v<T, std::string>) return "a name";
  else if constexpr (std::is_unsigned_v<T>) return "an integer >= 0";
  else if constexpr (std::is_integral_v<T>) return "an integer";
  else return "a number";
}

// The values of a list flag given as `given` (one string per occurrence of the flag), checked as the
// header says; otherwise std::invalid_argument naming `flag`. `allowed`, when not empty, lists the
// names a string element may take, comma-separated (as kMixerNames and knob_value_names write them).
template <class T>
std::vector<T> parse_list(const std::vector<std::string>& given, std::string_view flag, std::string_view allowed = {}) {
  std::vector<T> values;
  auto refuse = [&](const std::string& why) { return std::invalid_argument(fmt::format("{}: {}", flag, why)); };
  for (const std::string& list : given) {
    const std::string quoted = io::escape_bytes(list);
    if (list.find_first_not_of(' ') == std::string::npos)
      throw refuse(fmt::format("an empty list ('{}'); give one or more values separated by commas", quoted));
    std::size_t begin = 0, index = 1;
    for (;; ++index) {
      const std::size_t end = std::min(list.find(',', begin), list.size());
      const std::size_t first = list.find_first_not_of(' ', begin), last = list.find_last_not_of(' ', end - 1);
      if (first >= end || end == begin)
        throw refuse(fmt::format("element {} of '{}' is empty; values are separated by single commas", index, quoted));
      const std::string element = list.substr(first, last + 1 - first);
      T value{};
      // CLI11's conversion reads "-1" as an unsigned 2^64 - 1; a sign has no place in an unsigned value.
      if ((std::is_unsigned_v<T> && element.find('-') != std::string::npos) || !CLI::detail::lexical_cast(element, value))
        throw refuse(fmt::format("'{}' (in '{}') is not {}", io::escape_bytes(element), quoted, list_element_kind<T>()));
      if constexpr (std::is_same_v<T, std::string>) {
        bool known = allowed.empty();
        for (std::size_t a = 0; !known && a < allowed.size();) {
          const std::size_t e = std::min(allowed.find(',', a), allowed.size());
          known = allowed.substr(a, e - a) == element;
          a = allowed.find_first_not_of(' ', e + 1);
        }
        if (!known) throw refuse(fmt::format("unknown value '{}' (allowed: {})", io::escape_bytes(element), allowed));
      }
      if (std::find(values.begin(), values.end(), value) != values.end())
        throw refuse(fmt::format("'{}' is given twice (in '{}'); each value may appear once", io::escape_bytes(element), quoted));
      values.push_back(value);
      if (end == list.size()) break;
      begin = end + 1;
    }
  }
  return values;
}

// Adds `flag`, a list of T parsed by parse_list into `values` (which keeps its contents, the default,
// when the flag is not given; `values` must outlive the parse). --help shows the default joined by commas.
template <class T>
CLI::Option* add_list_option(CLI::App& app, const std::string& flag, std::vector<T>& values, const std::string& help,
                             std::string_view allowed = {}) {
  return app
      .add_option_function<std::vector<std::string>>(
          flag,
          [&values, flag, allowed = std::string(allowed)](const std::vector<std::string>& given) {
            values = parse_list<T>(given, flag, allowed);
          },
          help)
      ->expected(1)  // one list per occurrence: "--seeds 1 2" is not a list, "--seeds 1,2" is
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->type_name(fmt::format("{},...", CLI::detail::type_name<T>()))
      ->default_str(fmt::format("{}", fmt::join(values, ",")));
}

}  // namespace vla::cli
