// Data-parallel training over the ranks of a group (core/train/data_parallel.hpp), with thread ranks
// (tests/core/thread_group.hpp) so that it runs in every build and under the sanitizers: the N-rank run
// must be the one-process CPU run bit for bit, and its checkpoint must resume in one process.
#include "core/train/data_parallel.hpp"
#include "core/train/trainer.hpp"
#include "tests/core/thread_group.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <string>

using namespace vla;
namespace fs = std::filesystem;

namespace {

train::TrainConfig tiny(const std::string& mixer) {
  train::TrainConfig c;
  c.model.d_model = 16; c.model.heads = 2; c.model.d_head = 8; c.model.ffn = 32; c.model.layers = 2; c.model.max_len = 32;
  c.model.mixer.mixer = mixer;
  c.task.task = "copy";
  c.task.seq_len = 8;
  c.steps = 6; c.batch = 16; c.seed = 7; c.eval_batches = 1; c.eval_batch = 8; c.checkpoint_every = 2;
  return c;
}

fs::path tmpdir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("vla_dp_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

// Equal log rows, NaN (a column a step does not have) equal to NaN.
bool same_log(const std::vector<std::vector<double>>& a, const std::vector<std::vector<double>>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size()) return false;
    for (std::size_t j = 0; j < a[i].size(); ++j)
      if (!(a[i][j] == b[i][j] || (std::isnan(a[i][j]) && std::isnan(b[i][j])))) return false;
  }
  return true;
}

// The run on `size` thread ranks: rank 0 trains (into dir, unless empty), the others serve.
train::TrainResult train_on_ranks(int size, const train::TrainConfig& c, const fs::path& dir, const train::RunOptions& ro) {
  train::TrainResult out;
  test::run_ranks(size, [&](parallel::Group& g) {
    if (!g.root()) return train::serve_data_parallel(g, 1);
    struct Finish {
      parallel::Group& g;
      ~Finish() { train::finish_data_parallel(g); }
    } finish{g};
    out = train::train(c, dir, ro, train::data_parallel_device(g));
  });
  return out;
}

}  // namespace

TEST_CASE("data-parallel training on N ranks is the one-process CPU run, bit for bit", "[train][data-parallel]") {
  // 2 ranks (4 shards each), 3 (3, 3, 2: uneven) and 9 (more ranks than the 8 shards: one idles). The
  // root adds the shards in shard order as one process does, so every loss, the log and the final
  // parameters are equal, not close. If this fails, shards are lost, doubled, added in another order, or
  // a worker computed them with other parameters than the root's (a stale step).
  for (const std::string mixer : {"vla", "linear", "softmax"}) {
    const auto c = tiny(mixer);
    train::RunOptions ro;
    ro.threads = 2;
    const auto one = train::train(c, {}, ro);
    for (const int size : {2, 3, 9}) {
      const auto dp = train_on_ranks(size, c, {}, {});
      INFO(mixer << " on " << size << " ranks");
      CHECK(dp.losses == one.losses);
      CHECK(same_log(dp.log, one.log));
      CHECK(dp.eval_accuracy == one.eval_accuracy);
      REQUIRE(dp.params.t.size() == one.params.t.size());
      for (std::size_t i = 0; i < dp.params.t.size(); ++i) CHECK(dp.params.t[i] == one.params.t[i]);
    }
  }
}

TEST_CASE("a data-parallel run stopped half way resumes in one process to the uninterrupted run", "[train][data-parallel]") {
  // The device is "cpu" either way and the arithmetic is the same, so the checkpoint of a 2-rank run
  // stopped after 3 steps continues in one process to the uninterrupted run. If this fails, the
  // data-parallel run writes another checkpoint (device name, optimiser state) than the CPU one.
  const auto c = tiny("deltanet");
  const auto full = train::train(c, {}, {});
  const fs::path d = tmpdir("resume");
  train::RunOptions stop;
  stop.stop_after = 3;
  const auto half = train_on_ranks(2, c, d, stop);
  CHECK(half.interrupted);
  CHECK(train::checkpoint_device(d) == "cpu");
  const auto rest = train::resume(d, {});
  CHECK(rest.losses == full.losses);
  fs::remove_all(d);
}

TEST_CASE("data-parallel device: a group of one is the CPU device, and only the root may make it", "[train][data-parallel]") {
  test::run_ranks(1, [](parallel::Group& g) { CHECK(train::data_parallel_device(g).name == "cpu"); });
  test::run_ranks(2, [](parallel::Group& g) {
    if (g.root()) {
      train::finish_data_parallel(g);  // the worker below must not wait for a batch
      return;
    }
    CHECK_THROWS_AS(train::data_parallel_device(g), std::logic_error);
    train::serve_data_parallel(g, 1);  // returns on the root's finish
  });
}
