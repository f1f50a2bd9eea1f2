// Every list flag (cli/list_option.hpp) refuses a malformed list while parsing, naming the flag, with
// exit 2 and before any work. A failure means a command runs something other than what was asked:
// `vla stability --seeds ""` used to run seed 0.
#include "cli_helpers.hpp"

#include <catch2/catch.hpp>

using namespace vla;
using namespace vla::test;

TEST_CASE("list options: empty lists, empty elements, wrong types, unknown names and repeats are refused", "[cli]") {
  check_refused("stability --seeds ''", "--seeds: an empty list");
  check_refused("stability --seeds 1,,2", "--seeds: element 2 of '1,,2' is empty");
  check_refused("stability --seeds 1,", "--seeds: element 2 of '1,' is empty");
  check_refused("stability --seeds -1", "--seeds: '-1' (in '-1') is not an integer >= 0");
  check_refused("stability --seeds 3,x", "is not an integer >= 0");
  check_refused("stability --seeds 4,4", "--seeds: '4' is given twice");
  check_refused("stability --mixers vla,mamba", "--mixers: unknown value 'mamba'");
  check_refused("train --task mqar --mixers vla,vla --steps 1", "--mixers: 'vla' is given twice");
  check_refused("train --task mqar --seeds '' --steps 1", "--seeds: an empty list");
  check_refused("study run fig5-mqar-capacity --quick --pairs 8,,16", "--pairs: element 2");
}

TEST_CASE("list options: spaces around elements are ignored and a repeated flag appends", "[cli]") {
  // The control for the refusals above: the same command with well-formed lists runs.
  for (const char* seeds : {"--seeds ' 1, 2 '", "--seeds 1 --seeds 2"}) {
    ScratchDir dir{"lists_ok"};
    const auto r = run_command(fmt::format("{} stability --T 10 --d-head 4 {} --out {}", kVla, seeds, dir / "out"));
    INFO(seeds);
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK(fs::exists(dir.path / "out"));
  }
}
