// `vla train` with the mixer's knobs and with several runs (--seeds, --mixers), end to end through the
// built binary, on the CPU (the GPU's many-runs mode is gpu/train-resume-check.sh on the device):
//  - the knobs given on the command line reach the run and are stored in its summary.json and checkpoint;
//  - --seeds x --mixers write one run per mixer and seed in OUT/<mixer>_seed<S>/, each the run that
//    --mixer M --seed S writes alone (log.csv byte for byte), and --resume OUT continues all of them;
//  - --seeds with --seed (or --mixers with --mixer) is refused rather than one of them ignored, and so is
//    --recurrent-form off one GPU.
// A failure means a knob is dropped on the way (a run with the default instead of the asked value), the
// runs of one call are not the runs a researcher would get one by one, or a stopped batch of runs cannot
// be continued.
#include "cli_helpers.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace vla;
using namespace vla::test;

namespace {

// A tiny model (d = 16, 2 heads of 8) on MQAR n = 4: a few ms per step.
std::string tiny(int steps) {
  return fmt::format("--task mqar --pairs 4 --d-model 16 --heads 2 --d-head 8 --ffn 32 --layers 2 --steps {} --batch 8 "
                     "--eval-batches 1 --checkpoint-every 2 --threads 1", steps);
}

}  // namespace

TEST_CASE("vla train: the mixer's knobs reach the run and are stored in its summary", "[cli][train]") {
  ScratchDir dir("knobs");
  const auto r = run_command(fmt::format("{} train {} --mixer vla --lambda0 0.25 --eps 0.001 --refresh-period 3 --refresh 0.01 "
                                         "--delta-policy skip --out {}", kVla, tiny(2), dir / "run"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto cfg = nlohmann::json::parse(read_file(dir.path / "run/summary.json")).at("config");
  CHECK(cfg.at("lambda0") == 0.25);
  CHECK(cfg.at("eps") == 0.001);
  CHECK(cfg.at("refresh_period") == 3);
  CHECK(cfg.at("refresh_eta") == 0.01);
  CHECK(cfg.at("delta_policy") == "skip");
  // The knobs change the run: its log differs from the default run's.
  const auto d = run_command(fmt::format("{} train {} --mixer vla --out {}", kVla, tiny(2), dir / "default"));
  REQUIRE(d.exit_code == 0);
  CHECK(nlohmann::json::parse(read_file(dir.path / "default/summary.json")).at("config").at("delta_policy") == "clamp");
  CHECK(read_file(dir.path / "run/log.csv") != read_file(dir.path / "default/log.csv"));
}

TEST_CASE("vla train --seeds --mixers: one run per mixer and seed, each the run made alone, resumable together", "[cli][train]") {
  ScratchDir dir("runs");
  // Stopped after 2 of 4 steps, then continued with --resume OUT (no --seeds/--mixers: the runs are found).
  const auto part = run_command(fmt::format("{} train {} --seeds 3,5 --mixers vla,deltanet --stop-after 2 --out {}", kVla, tiny(4),
                                            dir / "many"));
  INFO(part.output);
  REQUIRE(part.exit_code == 0);
  CHECK(part.output.find("4 runs, 8 run-steps run one after another on cpu") != std::string::npos);
  for (const std::string run : {"vla_seed3", "vla_seed5", "deltanet_seed3", "deltanet_seed5"})
    CHECK(nlohmann::json::parse(read_file(dir.path / "many" / run / "summary.json")).at("steps_done") == 2);
  const auto rest = run_command(fmt::format("{} train --resume {}", kVla, dir / "many"));
  INFO(rest.output);
  REQUIRE(rest.exit_code == 0);
  CHECK(rest.output.find("4 runs, 8 run-steps") != std::string::npos);
  for (const auto& [mixer, seed] : std::vector<std::pair<std::string, int>>{{"vla", 3}, {"vla", 5}, {"deltanet", 3}, {"deltanet", 5}}) {
    const std::string run = fmt::format("{}_seed{}", mixer, seed);
    const auto alone = run_command(fmt::format("{} train {} --mixer {} --seed {} --out {}", kVla, tiny(4), mixer, seed, dir / run));
    REQUIRE(alone.exit_code == 0);
    INFO(run);
    CHECK(read_file(dir.path / "many" / run / "log.csv") == read_file(dir.path / run / "log.csv"));
  }
  // Resuming a finished batch of runs with the same --seeds/--mixers names them; a missing one is refused.
  const auto missing = run_command(fmt::format("{} train --resume {} --seeds 3,4 --mixers vla", kVla, dir / "many"));
  INFO(missing.output);
  CHECK(missing.exit_code == 2);
  CHECK(missing.output.find("vla_seed4") != std::string::npos);
}

TEST_CASE("vla train refuses --seeds with --seed and --mixers with --mixer", "[cli][train]") {
  for (const std::string both : {"--seeds 1,2 --seed 3", "--mixers vla,linear --mixer deltanet"})
    check_refused(fmt::format("train {} {}", tiny(2), both), "excludes");
}

TEST_CASE("vla train refuses --recurrent-form off one GPU and names it", "[cli][train]") {
  // The kernels of VLA's recurrence are a choice of the one-GPU path only: on the CPU a non-default form
  // would be silently ignored, so it is refused (and nothing written).
  for (const std::string form : {"chunked", "fused"}) check_refused(fmt::format("train {} --recurrent-form {}", tiny(2), form), "--recurrent-form");
}

TEST_CASE("vla train takes sequences up to --max-len and refuses longer ones naming it", "[cli][train]") {
  // The positional embedding has --max-len rows (256 by default): a longer --seq-len is refused before
  // anything is written, with the option that raises the limit named; raised, the same run trains.
  check_refused(fmt::format("train {} --seq-len 40 --max-len 32", tiny(1)), {"--seq-len", "--max-len"});
  ScratchDir dir("maxlen");
  const auto fits = run_command(fmt::format("{} train {} --seq-len 40 --max-len 40 --out {}", kVla, tiny(1), dir / "fits"));
  INFO(fits.output);
  CHECK(fits.exit_code == 0);
  CHECK(fs::exists(dir.path / "fits" / "summary.json"));
}
