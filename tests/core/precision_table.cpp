// The table of precisions (core/precisions.def -> Precisions in core/precision.hpp): the names it
// derives from ScalarInfo, the documented order, dispatch by name, and its filters.
#include "core/precision.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <type_traits>

using namespace vla;

namespace {
template <class P>
struct IsMixed : std::bool_constant<!std::is_same_v<typename P::storage_t, typename P::compute_t>> {};
}  // namespace

TEST_CASE("precision table: names from ScalarInfo, in the documented order", "[precision]") {
  // The order README.md, docs/recurrences.md and `vla --help` list.
  CHECK(kPrecisionNames == "float, double, half, bfloat16, mp50, mp100, half+float, bfloat16+float");
  STATIC_REQUIRE(Precisions::size == 8);
  STATIC_REQUIRE(Precision<bfloat16, float>::name() == "bfloat16+float");
  STATIC_REQUIRE(Precision<mp50>::name() == "mp50");
  CHECK(Precisions::name_list().front() == "float");
  CHECK(Precisions::name_list().back() == "bfloat16+float");
}

TEST_CASE("precision table: with_precision finds every precision by its name", "[precision]") {
  int found = 0;
  for (const auto& name : Precisions::name_list()) {
    INFO(name);
    CHECK(with_precision(name, [](auto p) { return std::string(decltype(p)::name()); }) == name);
    with_precision(name, [&](auto p) { found += Precisions::contains<decltype(p)> ? 1 : 0; });
  }
  CHECK(found == int(Precisions::size));
}

TEST_CASE("precision table: an unknown name is refused naming the flag and the allowed names", "[precision]") {
  CHECK_THROWS_WITH(with_precision("fp8", [](auto) { return 0; }),
                    Catch::Contains("--precision") && Catch::Contains("'fp8'") &&
                        Catch::Contains(std::string(kPrecisionNames)));
  using Two = Precisions::sub<Precision<mp50>, Precision<double>>;
  CHECK_THROWS_WITH(with_precision_in<Two>("half", "--precisions", [](auto) {}),
                    Catch::Contains("--precisions: unknown precision 'half' (allowed: double, mp50)"));
}

TEST_CASE("precision table: filters and sub-lists keep the table's order", "[precision]") {
  using Mixed = Precisions::filter<IsMixed>;
  STATIC_REQUIRE(std::is_same_v<Mixed, PrecisionList<Precision<half, float>, Precision<bfloat16, float>>>);
  CHECK(Mixed::names() == "half+float, bfloat16+float");
  // A sub-list is listed in the table's order, whatever order it is named in.
  STATIC_REQUIRE(std::is_same_v<Precisions::sub<Precision<mp50>, Precision<double>>,
                                PrecisionList<Precision<double>, Precision<mp50>>>);
}
