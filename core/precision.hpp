#pragma once
// Precision policy: where numbers live (Storage) and where arithmetic happens (Compute).
//
// Every recurrence is a template over a Precision<Storage, Compute>. State matrices, layer weights
// and outputs are held in Storage; each step loads what it needs into Compute, does all of its
// arithmetic there, and rounds what it writes back to Storage. Precision<T> (= Precision<T, T>) is
// plain arithmetic in T; Precision<bfloat16, float> is bf16 storage with fp32 accumulation, the way
// mixed-precision hardware kernels are usually written.
//
// The precisions the toolkit runs are the rows of core/precisions.def, gathered here into the type
// list `Precisions`; with_precision dispatches a name over it, and a use that runs only some of them
// takes a filter or a sub-list of it (PrecisionList::filter, ::sub), never a list of its own.
#include "core/scalar.hpp"

#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace vla {

namespace detail {
// Parts::parts joined by Parts::sep, as a constant with static storage (names built from ScalarInfo).
template <class Parts> struct Joined {
  static constexpr std::size_t size = [] {
    std::size_t n = Parts::parts.size() ? Parts::sep.size() * (Parts::parts.size() - 1) : 0;
    for (auto p : Parts::parts) n += p.size();
    return n;
  }();
  static constexpr std::array<char, size> chars = [] {
    std::array<char, size> t{};
    std::size_t i = 0;
    for (std::size_t p = 0; p < Parts::parts.size(); ++p) {
      if (p)
        for (char c : Parts::sep) t[i++] = c;
      for (char c : Parts::parts[p]) t[i++] = c;
    }
    return t;
  }();
  static constexpr std::string_view view() { return {chars.data(), size}; }
};
template <class Storage, class Compute> struct MixedNameParts {
  static constexpr std::array<std::string_view, 2> parts{ScalarInfo<Storage>::name, ScalarInfo<Compute>::name};
  static constexpr std::string_view sep = "+";
};
template <class... Ps> struct ListNameParts {
  static constexpr std::array<std::string_view, sizeof...(Ps)> parts{Ps::name()...};
  static constexpr std::string_view sep = ", ";
};
}  // namespace detail

template <class Storage, class Compute = Storage> struct Precision {
  using storage_t = Storage;
  using compute_t = Compute;
  // "storage", or "storage+compute" for a mixed policy: the name the command line accepts.
  static constexpr std::string_view name() {
    if constexpr (std::is_same_v<Storage, Compute>) {
      return ScalarInfo<Storage>::name;
    } else {
      return detail::Joined<detail::MixedNameParts<Storage, Compute>>::view();
    }
  }
};

template <class... Ps> struct PrecisionList;
namespace detail {
template <class List, template <class> class Keep> struct Filter;
template <class List, class... Qs> struct Sub;
}  // namespace detail

// A list of precisions: membership, names, filters, and dispatch of a name to its type.
template <class... Ps> struct PrecisionList {
  static constexpr std::size_t size = sizeof...(Ps);
  template <class P> static constexpr bool contains = (std::is_same_v<P, Ps> || ...);
  // "float, double, ...": what a --help text or an error message lists as allowed.
  static constexpr std::string_view names() {
    return detail::Joined<detail::ListNameParts<Ps...>>::view();
  }
  static std::vector<std::string> name_list() { return {std::string(Ps::name())...}; }
  // The precisions P of this list with Keep<P>::value, in this list's order.
  template <template <class> class Keep> using filter = typename detail::Filter<PrecisionList, Keep>::type;
  // The named precisions, each of which must be in this list, in this list's order.
  template <class... Qs> using sub = typename detail::Sub<PrecisionList, Qs...>::type;
};

namespace detail {
template <class... As, class... Bs> PrecisionList<As..., Bs...> operator+(PrecisionList<As...>, PrecisionList<Bs...>);
template <class... Ps, template <class> class Keep> struct Filter<PrecisionList<Ps...>, Keep> {
  using type = decltype((std::conditional_t<Keep<Ps>::value, PrecisionList<Ps>, PrecisionList<>>{} + ... +
                         PrecisionList<>{}));
};
template <class... Qs> struct OneOf {
  template <class P> using keep = std::bool_constant<(std::is_same_v<P, Qs> || ...)>;
};
template <class List, class... Qs> struct Sub {
  static_assert((List::template contains<Qs> && ...), "PrecisionList::sub: a precision that is not in the list");
  using type = typename List::template filter<OneOf<Qs...>::template keep>;
};

template <class List, class F, class P, class... Rest>
decltype(auto) dispatch_precision(std::string_view name, std::string_view flag, F& f, PrecisionList<P, Rest...>) {
  if (name == P::name()) return f(P{});
  if constexpr (sizeof...(Rest) > 0) {
    return dispatch_precision<List>(name, flag, f, PrecisionList<Rest...>{});
  } else {
    throw std::invalid_argument(fmt::format("{}: unknown precision '{}' (allowed: {})", flag, name, List::names()));
  }
}
}  // namespace detail

// Calls f(P{}) for the precision P of `List` named `name`; otherwise throws naming the command-line
// `flag` and the names `List` allows. Every call of f must return the same type.
template <class List, class F> decltype(auto) with_precision_in(std::string_view name, std::string_view flag, F&& f) {
  static_assert(List::size > 0, "with_precision_in: an empty list of precisions");
  return detail::dispatch_precision<List>(name, flag, f, List{});
}

// Every precision of the toolkit: the rows of core/precisions.def, in its order.
namespace detail {
template <class... Ps> struct DropFirst;
template <class... Ps> struct DropFirst<void, Ps...> { using type = PrecisionList<Ps...>; };
}  // namespace detail
#define VLA_PRECISION(Storage, Compute) , Precision<Storage, Compute>
using Precisions = detail::DropFirst<void
#include "core/precisions.def"
                                     >::type;
#undef VLA_PRECISION

// The names the command line accepts, in the order documented by `vla --help`.
inline constexpr std::string_view kPrecisionNames = Precisions::names();

// Calls f(Precision<...>{}) for a precision named on the command line (--precision); throws with the
// allowed names otherwise. Mixed policies are written storage+compute.
template <class F> decltype(auto) with_precision(std::string_view name, F&& f) {
  return with_precision_in<Precisions>(name, "--precision", std::forward<F>(f));
}

}  // namespace vla
