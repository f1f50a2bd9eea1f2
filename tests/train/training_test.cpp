// The training loop (core/train/trainer.hpp): determinism, resume == uninterrupted, bad configs
// rejected before any work, and a tiny copy task that learns. Tiny model (d = 16, H = 2) so each
// test takes about a second on 2 cores.
#include "core/train/trainer.hpp"
#include "tests/fuzz/checkpoint_files.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string_view>
#include <type_traits>

using namespace vla;
namespace fs = std::filesystem;

static train::TrainConfig tiny(const std::string& mixer, const std::string& task = "copy") {
  train::TrainConfig c;
  c.model.d_model = 16; c.model.heads = 2; c.model.d_head = 8; c.model.ffn = 32; c.model.layers = 2; c.model.max_len = 32;
  c.model.mixer.mixer = mixer;
  c.task.task = task;
  c.task.seq_len = task == "copy" ? 8 : 0;
  c.task.pairs = 4;
  c.steps = 6; c.batch = 8; c.seed = 42; c.eval_batches = 1; c.eval_batch = 8; c.checkpoint_every = 2;
  return c;
}

static fs::path tmpdir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("vla_train_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

TEST_CASE("training is bit-deterministic, whatever the thread count", "[train]") {
  // Same seed -> the same loss curve to the bit, on 1 and on 2 threads (the shard reduction order is
  // fixed, trainer.hpp). A failure means a data race or a thread-dependent summation order.
  for (const char* m : {"vla", "deltanet"}) {
    const auto c = tiny(m, "mqar");
    train::RunOptions r1, r2;
    r1.threads = 1;
    r2.threads = 2;
    const auto a = train::train(c, tmpdir("det_a"), r1);
    const auto b = train::train(c, tmpdir("det_b"), r2);
    REQUIRE(a.losses.size() == 6);
    CHECK(a.losses == b.losses);  // exact equality: bitwise determinism is the claim
    for (std::size_t i = 0; i < a.params.t.size(); ++i) CHECK(a.params.t[i] == b.params.t[i]);
  }
}

TEST_CASE("resume reproduces the uninterrupted run exactly", "[train]") {
  // Stop after 3 steps (checkpoint at the stop), resume to 6: losses and final parameters equal the
  // uninterrupted 6-step run bit for bit. A failure means state missing from the checkpoint (Adam
  // moments, step counter, data position) or a resumed run that draws different batches.
  const auto c = tiny("vla");
  const auto full = train::train(c, tmpdir("full"), {});
  const fs::path d = tmpdir("resumed");
  train::RunOptions stop;
  stop.stop_after = 3;
  const auto part = train::train(c, d, stop);
  CHECK(part.interrupted);
  CHECK(part.steps_done == 3);
  const auto rest = train::resume(d, {});
  CHECK(rest.steps_done == 6);
  CHECK(rest.losses == full.losses);
  for (std::size_t i = 0; i < full.params.t.size(); ++i) CHECK(rest.params.t[i] == full.params.t[i]);
  CHECK(fs::exists(d / "summary.json"));
  CHECK(fs::exists(d / "log.csv"));
}

TEST_CASE("progress_every 0 gives a line every ~10% of the run's steps, also on resume", "[train]") {
  // 20 steps: a line every 2 steps. Resumed after a stop at 7: every 2 steps counted from the resume
  // (9, 11, .., 19) and the last. A failure means the loop does not resolve 0 from the run's own step
  // count (on resume the caller does not know it), or a line at every step (0 taken as 1).
  auto c = tiny("vla");
  c.steps = 20;
  std::vector<std::string> lines;
  train::RunOptions ro;
  ro.progress = [&](const std::string& l) { lines.push_back(l); };
  ro.progress_every = 0;
  ro.stop_after = 7;
  const fs::path d = tmpdir("progress");
  train::train(c, d, ro);
  CHECK(lines.size() == 3);  // steps 2, 4, 6
  lines.clear();
  ro.stop_after = -1;
  train::resume(d, ro);
  REQUIRE(lines.size() == 7);  // steps 9, 11, .., 19, 20
  CHECK(lines.front().rfind("step 9/20", 0) == 0);
  CHECK(lines.back().rfind("step 20/20", 0) == 0);
}

TEST_CASE("bad training configs are rejected before any work", "[train]") {
  // Each must throw std::invalid_argument naming the parameter, and create no output folder.
  auto rejects = [](train::TrainConfig c, const std::string& param) {
    const fs::path d = tmpdir("bad");
    try {
      train::train(c, d, {});
      FAIL("accepted a bad config for " << param);
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find(param) != std::string::npos);
    }
    CHECK_FALSE(fs::exists(d));
  };
  auto c = tiny("vla", "mqar");
  c.task.pairs = 64;  // only 63 distinct keys / OOD keys
  rejects(c, "--pairs");
  c = tiny("vla", "copy");
  c.task.seq_len = 2;
  rejects(c, "--seq-len");
  c = tiny("vla");
  c.steps = 0;
  rejects(c, "--steps");
  c = tiny("vla");
  c.model.mixer.mixer = "mamba";
  rejects(c, "--mixer");
  c = tiny("vla", "mqar");
  c.task.pairs = 20;  // T = 61 > max_len 32
  rejects(c, "--seq-len");
}

TEST_CASE("a tiny model learns the copy task", "[train]") {
  // Copy with T = 8 (4 tokens), softmax and VLA mixers, 300 steps at lr 1e-2: the final training
  // loss must fall well below its start (ln 128 = 4.85 for a uniform head). A failure means the
  // gradients do not train the model (wrong sign, wrong scale, optimiser bug).
  for (const char* m : {"softmax", "vla"}) {
    auto c = tiny(m, "copy");
    c.steps = 300; c.batch = 16; c.opt.lr = 1e-2; c.checkpoint_every = 1000;
    const auto r = train::train(c, tmpdir("learn"), {});
    INFO(m << " first loss " << r.losses.front() << " last loss " << r.losses.back() << " eval acc " << r.eval_accuracy);
    CHECK(r.losses.front() > 4.5);
    CHECK(r.losses.back() < 0.5 * r.losses.front());
  }
}

TEST_CASE("resume refuses a device other than the run's, naming --device, and CPU checkpoints keep their format", "[train]") {
  // A run recorded as trained on "cuda" (here the CPU engine under that name, so no GPU is needed: the
  // refusal depends only on the recorded name). Resuming it on the CPU must throw naming --device and
  // the run's device, before touching the folder; on its own device it continues exactly. A failure
  // means a GPU run could be continued silently on the CPU (a different rounding: not the run it claims
  // to be), or the checkpoint lost the device it was trained on.
  const auto c = tiny("vla");
  train::Device fake_cuda = train::cpu_device();
  fake_cuda.name = "cuda";
  const fs::path d = tmpdir("device");
  train::RunOptions stop;
  stop.stop_after = 3;
  train::train(c, d, stop, fake_cuda);
  CHECK(train::checkpoint_device(d) == "cuda");
  const auto log_before = fs::file_size(d / "log.csv");
  CHECK_THROWS_AS(train::resume(d, {}), std::invalid_argument);
  CHECK_THROWS_WITH(train::resume(d, {}), Catch::Contains("--device") && Catch::Contains("cuda"));
  CHECK(fs::file_size(d / "log.csv") == log_before);
  const auto rest = train::resume(d, {}, fake_cuda);
  CHECK(rest.steps_done == 6);
  CHECK(rest.steps_run == 3);
  CHECK(rest.losses == train::train(c, {}, {}).losses);  // same engine: the uninterrupted run (written nowhere)

  // A CPU run's checkpoint has no "device" key (CPU checkpoints keep the key-less format), and such a
  // checkpoint reads as "cpu"; a missing one is named.
  const fs::path e = tmpdir("device_cpu");
  train::train(c, e, stop);
  CHECK(train::checkpoint_device(e) == "cpu");
  std::ifstream in(e / "checkpoint.bin", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(bytes.find("\"device\"") == std::string::npos);
  CHECK_THROWS_WITH(train::checkpoint_device(tmpdir("device_none")), Catch::Contains("--resume"));
}

TEST_CASE("every mixer knob is stored in the checkpoint, and a checkpoint with only some of them resumes with the defaults of the others", "[train]") {
  // (1) Every knob of MixerConfig survives TrainConfig's JSON, and a run with non-default knobs stopped
  // and resumed equals the uninterrupted run (the resumed run read its knobs from the checkpoint).
  // (2) A checkpoint whose config holds only lambda0, eps, refresh_period and refresh_eta of the knobs
  // (as the checkpoints of the toolkit's first releases do) loads with the other knobs at their defaults
  // and resumes to the uninterrupted default run. A failure means a knob is lost on resume (the
  // continued run is another run) or such checkpoints can no longer be continued.
  auto c = tiny("vla");
  auto& k = c.model.mixer;
  k.penalty.lambda0 = 0.25; k.penalty.eps = 1e-3; k.penalty.refresh_period = 3; k.penalty.refresh_eta = 0.01;
  k.penalty.policy = DeltaPolicy::SkipAddEps; k.penalty.rank = 2; k.renormalise_S = true; k.deltanet_gated = false;
  k.renorm_threshold = 7.5; k.falcon.ridge = 0.05; k.falcon.eps_gamma = 0.02; k.falcon.window = 2;
  k.mva_levels = 3; k.next_latent = true;
  const auto back = train::TrainConfig::from_json(nlohmann::json::parse(c.to_json().dump()));
  const MixerConfig defaults;
  // The value of the knob called `name` in `m` equals `value` (false when m has no such knob).
  auto knob_equals = [](const MixerConfig& m, std::string_view name, const auto& value) {
    bool same = false;
    for_each_knob(m, [&](const auto& ka) {
      if constexpr (std::is_same_v<typename std::decay_t<decltype(ka)>::value_type, std::decay_t<decltype(value)>>)
        if (ka.name == name) same = ka.value == value;
    });
    return same;
  };
  int knobs = 0;
  for_each_knob(back.model.mixer, [&](const auto& kb) {
    INFO(kb.name);
    CHECK(knob_equals(c.model.mixer, kb.name, kb.value));   // survived the round trip
    CHECK(!knob_equals(defaults, kb.name, kb.value));       // and was set away from its default, so that means something
    ++knobs;
  });
  CHECK(knobs == 14);  // a new knob: give it a non-default value above
  CHECK(back.model.mixer.penalty.policy == DeltaPolicy::SkipAddEps);
  CHECK(std::isinf(train::TrainConfig::from_json(nlohmann::json::parse(tiny("vla").to_json().dump())).model.mixer.renorm_threshold));

  // VLA ignores the DeltaNet and renormalisation knobs, and training takes rank 1 only: keep the run plain.
  k.deltanet_gated = true; k.renormalise_S = false; k.renorm_threshold = defaults.renorm_threshold; k.penalty.rank = 1;
  const auto full = train::train(c, {}, {});
  const fs::path d = tmpdir("knobs");
  train::RunOptions stop;
  stop.stop_after = 3;
  train::train(c, d, stop);
  const auto rest = train::resume(d, {});
  CHECK(rest.losses == full.losses);
  CHECK(rest.losses != train::train(tiny("vla"), {}, {}).losses);  // the knobs matter to this run

  // (2) The default run's checkpoint, rewritten without the five other knobs in the first releases'
  // format (format 1: no checksum).
  const auto plain = tiny("vla");
  const fs::path e = tmpdir("knobs_some");
  train::train(plain, e, stop);
  std::ifstream in(e / "checkpoint.bin", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  auto frame = fuzz::CheckpointFrame::of(bytes);
  auto j = nlohmann::json::parse(frame.json);
  for (const char* key : {"delta_policy", "rank", "renormalise_S", "renorm_threshold", "deltanet_gated"}) {
    CHECK(j.contains(key));
    j.erase(key);
  }
  frame.json = j.dump();
  frame.version = '1';
  std::ofstream(e / "checkpoint.bin", std::ios::binary | std::ios::trunc) << frame.bytes();
  const auto cont = train::resume(e, {});
  CHECK(cont.steps_done == 6);
  CHECK(cont.losses == train::train(plain, {}, {}).losses);
}
