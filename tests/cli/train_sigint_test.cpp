// `vla train` interrupted by SIGINT, end to end through the built binary (docs/training.md, "Training"):
// the run is spawned, SIGINT is sent once its first checkpoint exists, and then
//  - it exits 0 having printed "stopped (resume with --resume)", with summary.json saying complete: false;
//  - checkpoint.bin exists, is a training checkpoint at the step the run stopped at, and loads (--resume);
//  - log.csv is consistent: every line whole (newline-terminated, as many fields as the header), steps
//    1..k contiguous, k = the checkpoint's step;
//  - `--resume` finishes the run, and its log.csv and checkpoint.bin equal those of an uninterrupted run
//    of the same config byte for byte (the checkpoint holds parameters, both Adam moments and the log
//    rows; only its stored wall time may differ).
// A failure means an interrupted run loses or corrupts state (a half-written log or checkpoint, a step
// logged but not checkpointed, a resumed run that differs from the uninterrupted one), or SIGINT kills
// the run instead of stopping it.
// Robust on a loaded machine: no sleep is a correctness condition. The test polls for the checkpoint
// file, and if the run finished all its steps before the signal took effect (possible on a fast or
// oddly scheduled machine) it retries with twice the steps; every wait has a generous timeout.
#include "cli_helpers.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>

#include <fcntl.h>
#include <spawn.h>

extern char** environ;

using namespace vla;
using namespace vla::test;

namespace {

// Starts `kVla args...` with stdout and stderr to `log`, SIGINT at its default disposition and unblocked
// (a test runner may start us with SIGINT ignored or blocked; the child must receive it).
pid_t spawn_vla(const std::vector<std::string>& args, const fs::path& log) {
  std::vector<std::string> all{kVla};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  sigset_t none, def;
  sigemptyset(&none);
  sigemptyset(&def);
  sigaddset(&def, SIGINT);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &def);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, kVla.c_str(), &fa, &at, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  if (rc != 0) throw std::runtime_error(fmt::format("posix_spawn {}: {}", kVla, std::strerror(rc)));
  return pid;
}

constexpr auto kTimeout = std::chrono::seconds(600);  // per wait: far above the seconds a run takes

// Exit status of pid if it has ended (waited for), or -2 while it runs. -1: ended by a signal.
int poll_exit(pid_t pid) {
  int st = 0;
  const pid_t r = waitpid(pid, &st, WNOHANG);
  if (r == 0) return -2;
  if (r != pid) throw std::runtime_error(fmt::format("waitpid: {}", std::strerror(errno)));
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int wait_exit(pid_t pid) {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    const int r = poll_exit(pid);
    if (r != -2) return r;
    if (std::chrono::steady_clock::now() - t0 > kTimeout) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      throw std::runtime_error("vla train did not exit within the timeout");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// log.csv is whole: newline-terminated, every row as many fields as the header, step column 1..rows.
// Returns the number of rows, or -1 (with the reason in INFO) if not consistent.
int consistent_log_rows(const std::string& csv) {
  if (csv.empty() || csv.back() != '\n') return -1;  // a half-written last line
  std::stringstream ss(csv);
  std::string line;
  std::getline(ss, line);
  const auto fields = [](const std::string& l) { return std::count(l.begin(), l.end(), ',') + 1; };
  const auto header_fields = fields(line);
  if (line.rfind("step,", 0) != 0) return -1;
  int rows = 0;
  while (std::getline(ss, line)) {
    if (fields(line) != header_fields) return -1;
    if (std::stod(line.substr(0, line.find(','))) != rows + 1) return -1;  // steps contiguous from 1
    ++rows;
  }
  return rows;
}

std::vector<std::string> config_args(int steps) {
  // A tiny model (d = 16, 2 heads of 8) on MQAR n = 4: a few ms per step, a checkpoint every step so that
  // SIGINT can land between any two checkpoints.
  return {"--task", "mqar", "--pairs", "4", "--mixer", "vla", "--d-model", "16", "--heads", "2", "--d-head", "8",
          "--ffn", "32", "--layers", "2", "--steps", std::to_string(steps), "--batch", "8", "--seed", "7",
          "--eval-batches", "1", "--checkpoint-every", "1", "--threads", "1"};
}

}  // namespace

TEST_CASE("vla train: SIGINT stops resumably, and --resume equals the uninterrupted run", "[cli][train]") {
  ScratchDir dir("sigint");
  int steps = 100;
  int stopped_at = -1;
  fs::path run;
  for (int attempt = 0; attempt < 6 && stopped_at < 0; ++attempt, steps *= 2) {
    run = dir.path / fmt::format("interrupted{}", attempt);
    const fs::path log = dir.path / fmt::format("interrupted{}.out", attempt);
    auto args = config_args(steps);
    args.insert(args.begin(), "train");
    args.insert(args.end(), {"--out", run.string()});
    const pid_t pid = spawn_vla(args, log);
    // Wait for the first checkpoint (written atomically: if it exists, it is whole), or the run's end.
    const auto t0 = std::chrono::steady_clock::now();
    int code = -2;
    while (!fs::exists(run / "checkpoint.bin") && (code = poll_exit(pid)) == -2) {
      if (std::chrono::steady_clock::now() - t0 > kTimeout) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
        FAIL("no checkpoint within the timeout; output:\n" << read_file(log));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (code == -2) {
      kill(pid, SIGINT);
      code = wait_exit(pid);
    }
    const std::string out = read_file(log);
    INFO("attempt " << attempt << ", " << steps << " steps; output:\n" << out);
    REQUIRE(code == 0);  // documented: a SIGINT-stopped run exits 0 (and so does a completed one)
    const auto summary = nlohmann::json::parse(read_file(run / "summary.json"));
    if (summary.at("complete").get<bool>()) {
      // All steps ran before the signal took effect: the interruption was not exercised. Retry longer.
      CHECK(out.find("done after") != std::string::npos);
      continue;
    }
    stopped_at = summary.at("steps_done").get<int>();
    CHECK(out.find("stopped (resume with --resume)") != std::string::npos);
  }
  REQUIRE(stopped_at >= 1);  // the run was interrupted, after its first checkpoint
  steps /= 2;                // the config of the interrupted run
  INFO("interrupted after " << stopped_at << " of " << steps << " steps");
  CHECK(stopped_at < steps);

  // The checkpoint exists, is whole, and is the step the run stopped at; the log agrees with it.
  const std::string ck = read_file(run / "checkpoint.bin");
  CHECK(checkpoint_head(ck).step == stopped_at);
  CHECK(consistent_log_rows(read_file(run / "log.csv")) == stopped_at);
  for (const auto& e : fs::directory_iterator(run)) {  // no temporary file left behind by the atomic writes
    const auto name = e.path().filename().string();
    CHECK((name == "checkpoint.bin" || name == "log.csv" || name == "summary.json"));
  }

  // --resume loads the checkpoint and finishes the run.
  const auto resumed = run_command(fmt::format("{} train --resume '{}'", kVla, run.string()));
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK(resumed.output.find(fmt::format("done after {} steps", steps)) != std::string::npos);

  // The uninterrupted run of the same config.
  const fs::path ref = dir.path / "uninterrupted";
  std::string cmd = kVla + " train";
  for (const auto& a : config_args(steps)) cmd += " " + a;
  const auto full = run_command(cmd + " --out '" + ref.string() + "'");
  INFO(full.output);
  REQUIRE(full.exit_code == 0);

  const std::string log_a = read_file(run / "log.csv"), log_b = read_file(ref / "log.csv");
  CHECK(consistent_log_rows(log_a) == steps);
  CHECK(log_a == log_b);  // every step's loss, accuracy, lr, grad norm, eval, ||S||, ||A||
  const std::string ck_a = read_file(run / "checkpoint.bin"), ck_b = read_file(ref / "checkpoint.bin");
  REQUIRE(checkpoint_head(ck_a).step == steps);
  REQUIRE(checkpoint_head(ck_b).step == steps);
  REQUIRE(ck_a.size() == ck_b.size());
  // The stored wall time is the one field that legitimately differs (and so the checksum over it);
  // everything else byte for byte: config, step, Adam step, log rows, parameters, both Adam moments.
  CHECK(checkpoint_without_time(ck_a) == checkpoint_without_time(ck_b));
}

// `--resume` continues on the device the run was trained on (read from its checkpoint), and another
// --device is refused with an error naming --device (in a build without CUDA, cuda itself is refused
// naming --device). A failure means a run could silently continue on a device that rounds differently
// (the resumed run would not be the run the checkpoint came from) or the error leaves the user guessing.
TEST_CASE("vla train --resume keeps the run's device and refuses another, naming --device", "[cli][train]") {
  ScratchDir dir("device");
  std::string cmd = kVla + " train";
  for (const auto& a : config_args(4)) cmd += " " + a;
  const auto part = run_command(cmd + " --stop-after 2 --out '" + (dir / "run") + "'");
  INFO(part.output);
  REQUIRE(part.exit_code == 0);
  const auto wrong = run_command(fmt::format("{} train --resume '{}' --device cuda", kVla, dir / "run"));
  INFO(wrong.output);
  CHECK(wrong.exit_code != 0);
  CHECK(wrong.output.find("--device") != std::string::npos);
  CHECK(consistent_log_rows(read_file(dir.path / "run" / "log.csv")) == 2);  // the refusal touched nothing
  const auto ok = run_command(fmt::format("{} train --resume '{}'", kVla, dir / "run"));
  INFO(ok.output);
  CHECK(ok.exit_code == 0);
  CHECK(ok.output.find("done after 4 steps on cpu") != std::string::npos);
}
