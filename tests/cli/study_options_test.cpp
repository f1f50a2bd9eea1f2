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
