// `vla list mixers|precisions` (cli/commands/list.cpp): what --mixer and --precision take, from the
// registry and core/precisions.def. A failure means the list a user reads is not the list the commands
// accept (a rule registered but not listed, or listed with another name).
#include "cli_helpers.hpp"
#include "core/precision.hpp"
#include "core/rules/registry.hpp"

#include <catch2/catch.hpp>

using namespace vla;
using namespace vla::test;

TEST_CASE("vla list mixers names every registered mixer, vla list precisions every precision", "[cli][list]") {
  const auto m = run_command(kVla + " list mixers");
  INFO(m.output);
  REQUIRE(m.exit_code == 0);
  for (const auto name : Rules::kNames) CHECK(m.output.find(fmt::format("\n{} ", name)) != std::string::npos);
  CHECK(m.output.find(fmt::format("{} mixers", Rules::kCount)) != std::string::npos);
  const auto p = run_command(kVla + " list precisions");
  REQUIRE(p.exit_code == 0);
  CHECK(p.output.find(std::string(kPrecisionNames)) != std::string::npos);
  CHECK(run_command(kVla + " list").exit_code != 0);  // a subcommand is required
}
