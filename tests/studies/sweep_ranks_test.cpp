// The sweep split over ranks (studies/sweep_ranks.hpp), with ranks that are threads of this process
// (tests/core/thread_group.hpp) and a run store of their own each, as on hosts that share no filesystem:
// the root's store must end holding every run as a single process's sweep makes it, each rank must train
// exactly the runs dealt to it, and runs a rank finished or left half-done (its checkpoint) before the
// root received them must be delivered / resumed by a rerun. Tiny models (d = 8): about a second.
// tests/studies/mpi_sweep_test.cpp runs the same through mpirun.
#include "studies/sweep_ranks.hpp"
#include "tests/core/thread_group.hpp"
#include "tests/studies/sweep_helpers.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

using namespace vla;
using namespace vla::studies;
using namespace vla::test;
namespace fs = std::filesystem;

namespace {

// Equal cost, so the deal follows this order: rank 0 gets runs 0, 2, 4 and rank 1 runs 1, 3.
const std::vector<train::TrainConfig> kRuns{tiny("vla", 1), tiny("linear", 2), tiny("deltanet", 3), tiny("vla", 4), tiny("linear", 5)};

// The split sweep: the root sweeps `runs` into `root`, rank 1 serves into `other`. Returns the root's result.
SweepResult split_sweep(const RunStore& root, const RunStore& other) {
  SweepResult res;
  vla::test::run_ranks(2, [&](parallel::Group& g) {
    SweepOptions o = options();
    o.ranks = &g;
    if (g.root()) {
      res = sweep(kRuns, root, o);
      release_ranks(g);
    } else {
      serve_sweeps(other, o);
    }
  });
  return res;
}

// summary.json without the fields that measure this process (wall time, step time, host, time of day).
nlohmann::json summary_without_times(const fs::path& dir) {
  auto j = nlohmann::json::parse(bytes(dir / "summary.json"));
  j.erase("wall_time_s");
  j.erase("step_ms");
  j.erase("provenance");
  return j;
}

}  // namespace

TEST_CASE("sweep over ranks: the root's store ends as one process's, each rank trains its deal only", "[studies][ranks]") {
  Scratch ref_dir("ranks_ref"), root_dir("ranks_root"), other_dir("ranks_other");
  const RunStore ref(ref_dir.path), root(root_dir.path), other(other_dir.path);
  const auto single = sweep(kRuns, ref, options());
  REQUIRE(single.trained == 5);

  const auto split = split_sweep(root, other);
  CHECK(split.trained == 5);
  CHECK(split.reused == 0);
  CHECK(!split.interrupted);
  for (std::size_t i = 0; i < kRuns.size(); ++i) {
    INFO("run " << i);
    const auto& c = kRuns[i];
    const fs::path a = root.path(c, "cpu"), b = ref.path(c, "cpu");
    CHECK(bytes(a / "log.csv") == bytes(b / "log.csv"));
    CHECK(summary_without_times(a) == summary_without_times(b));
    CHECK(bytes(a / "key.json") == bytes(b / "key.json"));
    CHECK(fs::exists(a / "checkpoint.bin"));
    CHECK(split.outcomes.at(RunStore::key(c)).eval_accuracy == single.outcomes.at(RunStore::key(c)).eval_accuracy);
    CHECK(split.outcomes.at(RunStore::key(c)).dir == a);
    // Rank 1's own store holds its deal (runs 1, 3) and nothing else.
    CHECK(fs::exists(other.path(c, "cpu")) == (i % 2 == 1));
  }
  // A rerun finds every run in the root's store: nothing is dealt out to train.
  const auto again = split_sweep(root, other);
  CHECK(again.trained + again.resumed == 0);
  CHECK(again.reused == 5);
}

TEST_CASE("sweep over ranks: what a rank finished or left half-done before the root got it is delivered on rerun", "[studies][ranks]") {
  Scratch ref_dir("ranks_ref2"), root_dir("ranks_root2"), other_dir("ranks_other2");
  const RunStore ref(ref_dir.path), root(root_dir.path), other(other_dir.path);
  sweep(kRuns, ref, options());
  // Rank 1's store as a job that died left it: run 1 finished (never received by the root), run 3 stopped
  // after 3 of its 6 steps with a checkpoint; the root's store is empty.
  train::RunOptions ro;
  ro.threads = 1;
  train::train(kRuns[1], other.dir(kRuns[1], "cpu"), ro);
  ro.stop_after = 3;
  train::train(kRuns[3], other.dir(kRuns[3], "cpu"), ro);
  REQUIRE(read_outcome(kRuns[3], other.path(kRuns[3], "cpu")).status == RunOutcome::Status::Interrupted);

  const auto res = split_sweep(root, other);
  CHECK(res.reused == 1);   // run 1: from rank 1's store, not retrained
  CHECK(res.resumed == 1);  // run 3: continued from rank 1's checkpoint
  CHECK(res.trained == 3);  // the root's runs 0, 2, 4
  for (const auto& c : kRuns) CHECK(bytes(root.path(c, "cpu") / "log.csv") == bytes(ref.path(c, "cpu") / "log.csv"));
}

// A failure means a rank could write outside the run's folder (a crafted or corrupt message) or send the
// temporary files of an atomic write.
TEST_CASE("run files: packed without key.json or temporaries, unpacked only into the run's folder", "[studies][ranks]") {
  Scratch s("ranks_pack");
  const RunStore store(s.path / "a"), dest(s.path / "b");
  const auto c = kRuns[0];
  const fs::path dir = store.dir(c, "cpu");
  { std::ofstream(dir / "log.csv") << "step\n1\n"; }
  { std::ofstream(dir / "summary.json.tmp.123") << "half"; }
  RunOutcome out;
  out.cfg = c;
  out.dir = dir;
  const RunFiles f = unpack_run(pack_run(out, "trained"));
  CHECK(f.how == "trained");
  CHECK(f.device == "cpu");
  REQUIRE(f.files.size() == 1);
  CHECK(f.files[0].first == "log.csv");
  CHECK(f.files[0].second == "step\n1\n");
  write_run(dest, c, f);
  CHECK(bytes(dest.path(c, "cpu") / "log.csv") == "step\n1\n");
  for (const std::string bad : {"../escape", "..", "key.json", "a/b", ""}) {
    RunFiles g = f;
    g.files[0].first = bad;
    CHECK_THROWS_AS(write_run(dest, c, g), std::runtime_error);
  }
  CHECK(!fs::exists(dest.root() / "cpu" / "escape"));
}
