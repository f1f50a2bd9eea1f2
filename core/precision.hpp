#pragma once
// Precision policy: where numbers live (Storage) and where arithmetic happens (Compute).
//
// Every recurrence is a template over a Precision<Storage, Compute>. State matrices, layer weights
// and outputs are held in Storage; each step loads what it needs into Compute, does all of its
// arithmetic there, and rounds what it writes back to Storage. Precision<T> (= Precision<T, T>) is
// plain arithmetic in T; Precision<bfloat16, float> is bf16 storage with fp32 accumulation, the way
// mixed-precision hardware kernels are usually written.
#include "core/scalar.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <string_view>

namespace vla {

template <class Storage, class Compute = Storage> struct Precision {
  using storage_t = Storage;
  using compute_t = Compute;
  static std::string name() {
    if constexpr (std::is_same_v<Storage, Compute>) {
      return std::string(ScalarInfo<Storage>::name);
    } else {
      return fmt::format("{}+{}", ScalarInfo<Storage>::name, ScalarInfo<Compute>::name);
    }
  }
};

// The names the command line accepts, in the order documented by `vla --help`.
inline constexpr std::string_view kPrecisionNames =
    "float, double, half, bfloat16, mp50, mp100, half+float, bfloat16+float";

// Calls f(Precision<...>{}) for a precision named on the command line; throws with the allowed
// names otherwise. Mixed policies are written storage+compute.
template <class F> decltype(auto) with_precision(std::string_view name, F&& f) {
  if (name == "float") return f(Precision<float>{});
  if (name == "double") return f(Precision<double>{});
  if (name == "half") return f(Precision<half>{});
  if (name == "bfloat16") return f(Precision<bfloat16>{});
  if (name == "mp50") return f(Precision<mp50>{});
  if (name == "mp100") return f(Precision<mp100>{});
  if (name == "half+float") return f(Precision<half, float>{});
  if (name == "bfloat16+float") return f(Precision<bfloat16, float>{});
  throw std::invalid_argument(
      fmt::format("--precision: unknown precision '{}' (allowed: {})", name, kPrecisionNames));
}

}  // namespace vla
