// The run store and the sweep (studies/run_store.hpp, studies/sweep.hpp): equal configs share one run,
// a sweep stopped half way and run again redoes nothing finished and ends with the runs an uninterrupted
// sweep makes (bit for bit), and a diverged run is recorded once, not retrained. Tiny models (d = 8),
// about a second in all on 2 cores.
#include "studies/sweep.hpp"
#include "core/model/params.hpp"
#include "core/rules/registry.hpp"
#include "tests/studies/sweep_helpers.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

using namespace vla;
using namespace vla::studies;
using namespace vla::test;
namespace fs = std::filesystem;

TEST_CASE("run store: one folder per distinct config, shared by equal ones", "[studies]") {
  Scratch s("store");
  const RunStore store(s.path);
  const auto a = tiny("vla", 42);
  auto b = a;
  REQUIRE(store.dir(a, "cpu") == store.dir(b, "cpu"));
  b.eval_every = 3;  // any field of the config makes another run
  CHECK(store.dir(a, "cpu") != store.dir(b, "cpu"));
  b = a;
  b.opt.lr = 1e-3;
  CHECK(store.dir(a, "cpu") != store.dir(b, "cpu"));
  CHECK(store.dir(a, "cpu") != store.dir(a, "cuda"));  // the device is part of where a run lives
  // A folder holding another key is never shared.
  const fs::path d = store.dir(a, "cpu");
  { std::ofstream(d / "key.json") << "{\"other\": 1}\n"; }
  CHECK_THROWS_AS(store.dir(a, "cpu"), std::runtime_error);
}

TEST_CASE("sweep: studies asking for the same run share it, a second sweep trains nothing", "[studies]") {
  Scratch s("share");
  const RunStore store(s.path);
  const std::vector<train::TrainConfig> study1{tiny("vla", 42), tiny("linear", 42)}, study2{tiny("linear", 42), tiny("deltanet", 42)};
  std::vector<train::TrainConfig> both = study1;
  both.insert(both.end(), study2.begin(), study2.end());
  const auto r = sweep(both, store, options());
  CHECK(r.trained == 3);  // linear seed 42 is asked for twice and trained once
  CHECK(r.reused == 0);
  CHECK(r.outcomes.size() == 3);
  for (const auto& [key, out] : r.outcomes) {
    CHECK(out.status == RunOutcome::Status::Complete);
    CHECK(std::isfinite(out.eval_accuracy));
    CHECK(out.column("eval_accuracy").size() == 6);
  }
  const auto again = sweep(study2, store, options());
  CHECK(again.trained == 0);
  CHECK(again.resumed == 0);
  CHECK(again.reused == 2);
  CHECK(again.outcomes.at(RunStore::key(study2[0])).eval_accuracy == r.outcomes.at(RunStore::key(study2[0])).eval_accuracy);
}

TEST_CASE("sweep: reading a store back trains nothing and creates nothing", "[studies]") {
  // train = false (`vla study run --from-store`): finished runs are read as a training sweep reads them; a
  // run the store lacks is an error naming the flag and the run's folder, and no folder is made for it
  // (else a summary would silently train, or leave an empty run behind in someone's archive).
  Scratch s("read_back");
  const RunStore store(s.path);
  const std::vector<train::TrainConfig> runs{tiny("vla", 42), tiny("linear", 42)};
  const auto trained = sweep({runs[0]}, store, options());
  REQUIRE(trained.trained == 1);
  SweepOptions o = options();
  o.train = false;
  const auto read = sweep({runs[0]}, store, o);
  CHECK(read.trained == 0);
  CHECK(read.reused == 1);
  CHECK(read.outcomes.at(RunStore::key(runs[0])).eval_accuracy == trained.outcomes.at(RunStore::key(runs[0])).eval_accuracy);
  CHECK_THROWS_WITH(sweep(runs, store, o), Catch::Contains("--from-store: 1 of the 2 runs are not finished") &&
                                               Catch::Contains(store.path(runs[1], "cpu").string()));
  CHECK_FALSE(fs::exists(store.path(runs[1], "cpu")));
}

TEST_CASE("sweep: interrupted half way, the rerun redoes nothing finished and equals the uninterrupted sweep", "[studies]") {
  const std::vector<train::TrainConfig> runs{tiny("vla", 1), tiny("vla", 2), tiny("deltanet", 3), tiny("linear", 4)};
  Scratch ref_dir("ref"), cut_dir("cut");
  const RunStore ref(ref_dir.path), cut(cut_dir.path);
  const auto full = sweep(runs, ref, options());
  REQUIRE(full.trained == 4);

  // Stop during the second run: after the first run's "trained" line, at the third status line of the
  // second (one per step: status_every_s = 0).
  std::atomic<bool> stop{false};
  std::vector<std::string> lines;
  int after_first = -1;
  SweepOptions o = options();
  o.status_every_s = 0;
  o.interrupt = &stop;
  o.progress = [&](const std::string& l) {
    lines.push_back(l);
    if (l.find("  trained ") == 0 && after_first < 0) after_first = 0;
    else if (after_first >= 0 && l.rfind("sweep: 1/4", 0) == 0 && ++after_first == 3) stop = true;
  };
  const auto first = sweep(runs, cut, o);
  REQUIRE(first.interrupted);
  CHECK(first.trained == 1);
  const fs::path done = cut.dir(runs[0], "cpu"), half = cut.dir(runs[1], "cpu");
  REQUIRE(read_outcome(runs[0], done).status == RunOutcome::Status::Complete);
  REQUIRE(read_outcome(runs[1], half).status == RunOutcome::Status::Interrupted);
  REQUIRE(fs::exists(half / "checkpoint.bin"));
  CHECK(!fs::exists(cut.dir(runs[2], "cpu") / "checkpoint.bin"));  // never started
  const auto done_summary = bytes(done / "summary.json"), done_log = bytes(done / "log.csv");
  const auto done_time = fs::last_write_time(done / "summary.json");

  const auto second = sweep(runs, cut, options());
  CHECK(!second.interrupted);
  CHECK(second.reused == 1);   // the finished run: not touched
  CHECK(second.resumed == 1);  // the interrupted one: continued from its checkpoint
  CHECK(second.trained == 2);
  CHECK(bytes(done / "summary.json") == done_summary);
  CHECK(bytes(done / "log.csv") == done_log);
  CHECK(fs::last_write_time(done / "summary.json") == done_time);
  for (const auto& c : runs) {  // every run as the uninterrupted sweep made it
    CHECK(bytes(cut.dir(c, "cpu") / "log.csv") == bytes(ref.dir(c, "cpu") / "log.csv"));
    CHECK(second.outcomes.at(RunStore::key(c)).eval_accuracy == full.outcomes.at(RunStore::key(c)).eval_accuracy);
  }
}

TEST_CASE("sweep: a diverged run is recorded with its step and not trained again", "[studies]") {
  Scratch s("diverge");
  const RunStore store(s.path);
  auto bad = tiny("vla-no-knorm", 5);
  bad.opt.lr = 1000;  // the loss is non-finite within a few steps
  const auto good = tiny("vla", 5);
  const auto r = sweep({bad, good}, store, options());
  const auto& out = r.outcomes.at(RunStore::key(bad));
  REQUIRE(out.status == RunOutcome::Status::Diverged);
  CHECK(out.diverged_step > 0);
  CHECK(std::isnan(out.eval_accuracy));
  CHECK(r.diverged == 1);
  CHECK(r.outcomes.at(RunStore::key(good)).status == RunOutcome::Status::Complete);
  const auto again = sweep({bad, good}, store, options());
  CHECK(again.trained + again.resumed == 0);
  CHECK(again.outcomes.at(RunStore::key(bad)).status == RunOutcome::Status::Diverged);
}

TEST_CASE("sweep: runs the device refuses train on the CPU beside it, several at once, as they do one at a time", "[studies]") {
  // A device with no kernel for vla (as the GPU has none for Table 4's ablations): vla's runs go to the CPU
  // fallback. Run three of them at once and one at a time: the same bits, or concurrent CPU runs share
  // state they should not (a thread pool, a random stream).
  auto opts = [](int at_once) {
    SweepOptions o = options();
    o.device.name = "no-vla";
    o.device.check = [](const train::TrainConfig& c) {
      if (c.model.mixer.mixer == "vla") throw std::invalid_argument("mixer: no kernel for vla");
    };
    o.fallback_concurrent = at_once;
    return o;
  };
  const std::vector<train::TrainConfig> runs{tiny("vla", 1), tiny("vla", 2), tiny("vla", 3), tiny("linear", 1)};
  Scratch one("fallback1"), three("fallback3");
  const RunStore s1(one.path), s3(three.path);
  const auto r1 = sweep(runs, s1, opts(1));
  const auto r3 = sweep(runs, s3, opts(3));
  CHECK(r1.trained == 4);
  CHECK(r3.trained == 4);
  for (const auto& c : runs) {
    INFO(c.model.mixer.mixer << " seed " << c.seed);
    const std::string where = c.model.mixer.mixer == "vla" ? "cpu" : "no-vla";
    REQUIRE(fs::exists(s3.dir(c, where) / "summary.json"));
    CHECK(bytes(s3.dir(c, where) / "log.csv") == bytes(s1.dir(c, where) / "log.csv"));
  }
}

// The plan's GEMM floor counts each weight entry once per token: if dense_macs_per_token missed a projection
// a mixer has (a gate, W_u) or counted one it lacks, the floor `vla study plan` prints would be wrong.
TEST_CASE("dense_macs_per_token: every weight matrix of init_params once, the embedding as the head", "[studies]") {
  for (const std::string_view name : Rules::kNames)
    for (const auto& [d, heads, dh, ffn] : {std::array{8, 2, 4, 16}, std::array{12, 3, 6, 20}}) {
      auto c = tiny(std::string(name), 1).model;
      c.d_model = d; c.heads = heads; c.d_head = dh; c.ffn = ffn;
      const auto p = model::init_params<double>(c, 3);
      long long entries = 0;
      for (std::size_t i = 0; i < p.t.size(); ++i)
        if (p.t[i].cols() > 1 && p.names[i] != "pos_emb") entries += p.t[i].size();
      INFO(name << " d=" << d << " H=" << heads << " dh=" << dh);
      CHECK(model::dense_macs_per_token(c) == entries);
    }
}
