// `vla study run` / `plan` refuse a count they cannot honour, naming the flag, with exit 2 and before any
// work. A failure means a sweep starts with no worker (zero runs at once) or a silently changed setting.
#include "cli_helpers.hpp"

#include <catch2/catch.hpp>

using namespace vla;
using namespace vla::test;

TEST_CASE("study run and plan refuse run counts below one and unknown study ids, before any work", "[cli]") {
  const std::pair<const char*, const char*> cases[] = {
      {"study run fig5-mqar-capacity --quick --concurrent 0", "--concurrent: must be >= 1, got 0"},
      {"study run fig5-mqar-capacity --quick --cpu-concurrent 0", "--cpu-concurrent: must be >= 1, got 0"},
      {"study plan fig5-mqar-capacity --cpu-concurrent -2", "--cpu-concurrent: must be >= 1, got -2"},
      {"study run fig5-mqar-capacity --quick --cpu-threads -1", "--threads/--cpu-threads: must be >= 0"},
      {"study run fig55 --quick", "fig55"},
  };
  for (const auto& [args, must_mention] : cases) check_refused(args, must_mention);
}

// `vla study plan` with several studies says what each adds: a run two studies share counts once, for the first
// in the order given, so the per-study counts add up to the runs to train. A failure means a cut made from the
// breakdown (dropping a study) would not remove the time it says.
TEST_CASE("study plan: the per-study breakdown counts each shared run once, for the first study given", "[cli]") {
  ScratchDir dir("plan-breakdown");
  auto runs_of = [](const std::string& out, const std::string& what) {
    const auto at = out.find(what);
    REQUIRE(at != std::string::npos);
    return std::stoi(out.substr(at + what.size()));
  };
  const std::string store = dir / "store";
  const auto ab = run_command(fmt::format("{} study plan table9-per-seed fig5-mqar-capacity --quick --store {}", kVla, store));
  const auto ba = run_command(fmt::format("{} study plan fig5-mqar-capacity table9-per-seed --quick --store {}", kVla, store));
  INFO(ab.output << ba.output);
  REQUIRE(ab.exit_code == 0);
  REQUIRE(ba.exit_code == 0);
  const int total = runs_of(ab.output, "to train: ");
  CHECK(runs_of(ba.output, "to train: ") == total);
  // Table 9's quick runs are all among Fig. 5's: first, it has them all; second, none.
  const int t9_first = runs_of(ab.output, "table9-per-seed "), f5_second = runs_of(ab.output, "fig5-mqar-capacity ");
  const int f5_first = runs_of(ba.output, "fig5-mqar-capacity "), t9_second = runs_of(ba.output, "table9-per-seed ");
  CHECK(t9_first + f5_second == total);
  CHECK(f5_first == total);
  CHECK(t9_second == 0);
  CHECK(t9_first > 0);
}
