// The mixer's knobs on the command line (cli/mixer_options.hpp): every command that builds a mixer
// takes the same flags, with the same help and the defaults of MixerConfig, and refuses a bad value
// while parsing, with exit 2 and a message naming the flag and what is allowed, before any work. A
// failure means a command registers a knob of its own (a second help text or default, a flag missing
// from one command), or a bad value reaches the computation (a NaN run instead of an error).
#include "cli_helpers.hpp"

#include "core/rules/mixer_config.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

using namespace vla;
using namespace vla::test;

namespace {

// Occurrences of `needle` in `s`.
int count(const std::string& s, const std::string& needle) {
  int n = 0;
  for (auto at = s.find(needle); at != std::string::npos; at = s.find(needle, at + needle.size())) ++n;
  return n;
}

// The help line of `flag` (from the flag to the end of its help text, which CLI11 may wrap).
std::string help_of(const std::string& help, const std::string& flag) {
  const auto at = help.find("  " + flag + " ");
  if (at == std::string::npos) return {};
  const auto next = help.find("\n  --", at + 1);
  return help.substr(at, next == std::string::npos ? std::string::npos : next - at);
}

}  // namespace

TEST_CASE("every command that builds a mixer lists each of its knobs once, with MixerConfig's default and help", "[cli]") {
  // The flags each command takes: all nine, but the analyses (their head streams are rank 1) take no
  // --rank, the atlas (its --policies set the delta policy) no --delta-policy, training no --rank.
  const std::vector<std::string> all{"--lambda0", "--eps", "--refresh-period", "--refresh", "--delta-policy", "--rank", "--ridge", "--eps-gamma",
                                     "--window"};
  const std::vector<std::pair<std::string, std::vector<std::string>>> commands{
      {"layer-forward", all},
      {"stability", all},
      {"jacobian", {"--lambda0", "--eps", "--refresh-period", "--refresh", "--delta-policy", "--ridge", "--eps-gamma", "--window"}},
      {"recovery", {"--lambda0", "--eps", "--refresh-period", "--refresh", "--delta-policy", "--ridge", "--eps-gamma", "--window"}},
      {"precision-atlas", {"--lambda0", "--eps", "--refresh-period", "--refresh", "--ridge", "--eps-gamma", "--window"}},
      {"train", {"--lambda0", "--eps", "--refresh-period", "--refresh", "--delta-policy", "--ridge", "--eps-gamma", "--window"}},
  };
  std::map<std::string, std::string> first_help;  // flag -> its help line in the first command
  for (const auto& [cmd, flags] : commands) {
    const auto r = run_command(fmt::format("{} {} --help", kVla, cmd));
    INFO(cmd << ":\n" << r.output);
    REQUIRE(r.exit_code == 0);
    for (const auto& f : all) {
      const bool takes = std::find(flags.begin(), flags.end(), f) != flags.end();
      CHECK(count(r.output, "  " + f + " ") == (takes ? 1 : 0));
      if (!takes) continue;
      const std::string line = help_of(r.output, f);
      if (!first_help.count(f)) first_help[f] = line;
      CHECK(line == first_help[f]);  // the same type, default and help text everywhere
    }
    const MixerConfig d;
    CHECK(help_of(r.output, "--lambda0").find(fmt::format("FLOAT={}", d.penalty.lambda0)) != std::string::npos);
    CHECK(help_of(r.output, "--refresh-period").find(fmt::format("INT={}", d.penalty.refresh_period)) != std::string::npos);
  }
}

TEST_CASE("every command that builds a mixer refuses a bad knob while parsing, naming the flag", "[cli]") {
  ScratchDir dir("knobs");
  for (const std::string cmd : {"layer-forward", "stability", "jacobian", "recovery", "precision-atlas", "train"}) {
    for (const auto& [args, flag, allowed] :
         std::vector<std::tuple<std::string, std::string, std::string>>{{"--lambda0 0", "--lambda0", "> 0"},
                                                                        {"--eps -1", "--eps", "> 0"},
                                                                        {"--refresh-period -2", "--refresh-period", ">= 0"},
                                                                        {"--refresh nan", "--refresh", ">= 0"},
                                                                        {"--ridge -1", "--ridge", ">= 0"},
                                                                        {"--eps-gamma 1", "--eps-gamma", "in (0, 1)"},
                                                                        {"--window 0", "--window", "an integer in [1, 1024]"}}) {
      const std::string out = dir / "out";
      const auto r = run_command(fmt::format("{} {} {} {} {}", kVla, cmd, args, cmd == "layer-forward" ? "--output" : "--out", out));
      INFO(cmd << " " << args << ":\n" << r.output);
      CHECK(r.exit_code == 2);
      CHECK(r.output.find(flag + ": must be") != std::string::npos);
      CHECK(r.output.find(allowed) != std::string::npos);
      CHECK_FALSE(fs::exists(out));  // refused before any work
    }
  }
  for (const std::string cmd : {"stability", "jacobian", "recovery", "train"}) {
    const auto r = run_command(fmt::format("{} {} --delta-policy sometimes --out {}", kVla, cmd, dir / "out"));
    INFO(cmd << ":\n" << r.output);
    CHECK(r.exit_code == 2);
    CHECK(r.output.find("--delta-policy: unknown value 'sometimes' (allowed: clamp, skip)") != std::string::npos);
  }
}
