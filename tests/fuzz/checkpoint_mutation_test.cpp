// The checkpoint reader under a deterministic mutation attack: valid checkpoints of three small
// configs (written by tiny training runs, tests/fuzz/checkpoint_files.hpp), in format 2 and format 1,
// mutated byte by byte, behind a renewed checksum, field by field and truncated, must each be decoded
// to exactly what they hold or refused with a clear error naming --resume (tests/fuzz/harness.hpp);
// never another exception, a crash, an allocation beyond what the file holds, or a hang. `make fuzz`
// runs the same check (tests/fuzz/checkpoint_target.hpp) under libFuzzer for longer.
#include "tests/fuzz/checkpoint_files.hpp"
#include "tests/fuzz/campaign.hpp"
#include "tests/fuzz/checkpoint_target.hpp"
#include "tests/fuzz/mutate.hpp"

#include "core/rules/registry.hpp"
#include "core/train/checkpoint.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <array>
#include <chrono>
#include <iostream>
#include <limits>
#include <vector>

using namespace vla;

namespace {

template <std::size_t N, class T> const T& pick(fuzz::Mutator& m, const std::array<T, N>& a) { return a[m.below(N)]; }

// A file without its checksum, mutated, then given a fresh one: the edit reaches every check behind it.
std::string mutated_behind_checksum(fuzz::Mutator& m, const std::string& file) {
  std::string b = m.mutate(file.substr(0, file.size() - 4));
  const std::uint32_t crc = io::crc32(b);
  b.append(reinterpret_cast<const char*>(&crc), 4);
  return b;
}

// One key of the config set to a hostile value (wrong types, out of range, huge, non-finite, nested),
// removed, or an unknown key added; in format 2 with a fresh checksum, or format 1.
std::string edited_config(fuzz::Mutator& m, fuzz::CheckpointFrame f) {
  static const std::array<nlohmann::json, 24> values{
      0, 1, 2, -1, 3, 8, 16, std::numeric_limits<int>::max(), 2147483648LL, std::numeric_limits<std::int64_t>::max(),
      std::numeric_limits<std::uint64_t>::max(), 1e300, 0.5, -0.0, "1", "inf", "nan", "vla", "\x1b[2J", nullptr, true,
      nlohmann::json::array(), nlohmann::json::object(), nlohmann::json::parse("[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]")};
  auto j = nlohmann::json::parse(f.json);
  std::vector<std::string> keys;
  for (const auto& [key, value] : j.items()) keys.push_back(key);
  const std::string key = keys[m.below(keys.size())];
  switch (m.below(8)) {
    case 0: j.erase(key); break;
    case 1: j["unknown_key"] = 1; break;
    case 2: j["device"] = pick(m, values); break;
    default: j[key] = pick(m, values); break;
  }
  f.json = j.dump();
  if (m.below(4) == 0) f.version = '1';
  return f.bytes();
}

// One number of the frame set to a hostile value: a counter, a log size, a tensor's rows or cols, or
// a value of the log or of a tensor (NaN, infinities, negative, huge).
std::string edited_number(fuzz::Mutator& m, fuzz::CheckpointFrame f) {
  static constexpr std::array<std::int64_t, 12> ints{0, 1, -1, 2, 3, 7, 1LL << 31, 1LL << 32, 1LL << 62,
                                                     std::numeric_limits<std::int64_t>::max(), std::numeric_limits<std::int64_t>::min(), 4};
  static constexpr std::array<double, 8> reals{std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                                               -std::numeric_limits<double>::infinity(), -1.0, -1e-30, 1e300, 0.0, 3.0};
  // Draws are sequenced one per statement: the order of a call's arguments is unspecified, and the
  // inputs must be the same with every compiler.
  const auto tensors = f.tensor_offsets();
  const auto kind = m.below(4);
  const std::size_t t = tensors[m.below(tensors.size())];
  const std::int64_t i = pick(m, ints);
  const double x = pick(m, reals);
  switch (kind) {
    case 0: f.set<std::int64_t>(8 * m.below(5), i); break;  // step, wall time, AdamW step, log rows, log cols
    case 1: f.set<std::int64_t>(t + 8 * m.below(2), i); break;  // a tensor's rows or cols
    case 2: {  // a log value
      const std::size_t n = f.get<std::uint64_t>(24) * f.get<std::uint64_t>(32);
      if (n) f.set<double>(40 + 8 * m.below(n), x);
      break;
    }
    default: {  // a tensor value
      const std::size_t n = std::size_t(f.get<std::int64_t>(t) * f.get<std::int64_t>(t + 8));
      if (n) f.set<float>(t + 16 + 4 * m.below(n), float(x));
      break;
    }
  }
  if (m.below(4) == 0) f.version = '1';
  return f.bytes();
}

}  // namespace

TEST_CASE("checkpoint reader under 30,000 deterministic mutations: decoded exactly or refused clearly", "[train][fuzz]") {
  // If this fails, some damaged checkpoint.bin makes `vla train --resume` crash, allocate what the file
  // cannot hold, resume from values the file does not hold, or print an unclear or raw-byte error.
  // The first findings are printed with their input (escaped), each reproducible from the fixed seed.
  std::vector<std::string> v2 = fuzz::valid_checkpoints(), v1;
  for (const auto& f : v2) {
    REQUIRE(fuzz::check_checkpoint(f).accepted);
    auto frame = fuzz::CheckpointFrame::of(f);
    frame.version = '1';
    v1.push_back(frame.bytes());
    REQUIRE(fuzz::check_checkpoint(v1.back()).accepted);
  }

  fuzz::Mutator m(0x5eed'2024'0016'c4ULL);
  std::array<fuzz::Phase, 6> phases{{{"byte mutations of format 2 files", 4000},
                                     {"byte mutations of format 1 files (no checksum)", 8000},
                                     {"byte mutations behind a renewed checksum", 8000},
                                     {"config key edits", 5000},
                                     {"number edits (counters, sizes, shapes, values)", 4000},
                                     {"truncations", 1000}}};
  const auto r = fuzz::run_campaign(phases, [&](std::size_t p) -> std::string {
    const std::size_t which = m.below(v2.size());
    switch (p) {
      case 0: return m.mutate(v2[which]);
      case 1: return m.mutate(v1[which]);
      case 2: return mutated_behind_checksum(m, v2[which]);
      case 3: return edited_config(m, fuzz::CheckpointFrame::of(v2[which]));
      case 4: return edited_number(m, fuzz::CheckpointFrame::of(v2[which]));
      default: {
        const std::string& f = m.below(2) ? v2[which] : v1[which];
        return f.substr(0, m.below(f.size()));
      }
    }
  }, [](const std::string& input) { return fuzz::check_checkpoint(input); });
  CHECK(r.total == 30000);
  INFO(r.first_findings);
  CHECK(r.findings == 0);
  // A hang would show as one input taking seconds; each input is a file of about 10-20 kB decoded in
  // well under a millisecond, so one second is a bound no loaded machine reaches.
  CHECK(r.slowest < 1.0);
}

TEST_CASE("every mixer's checkpoint reads back as written, with init_params's tensor names and shapes", "[train][fuzz]") {
  // If this fails, the reader's own list of tensor shapes (checkpoint.cpp param_shapes, checked before
  // anything is allocated) no longer matches core/model/params.hpp init_params for some rule, so its
  // checkpoints cannot resume.
  for (const std::string_view name : Rules::kNames) {  // every mixer of the registry
    const std::string mixer(name);
    INFO(mixer);
    const auto cfg = fuzz::tiny_train_config(mixer, "mqar", 2);
    const std::string bytes = fuzz::trained_checkpoint(cfg, 1);
    const fuzz::Verdict v = fuzz::check_checkpoint(bytes);
    INFO(v.refusal << v.finding);
    CHECK(v.accepted);
    CHECK(v.finding.empty());
    const train::Checkpoint c = train::decode_checkpoint(bytes, "--resume: test");
    CHECK(train::encode_checkpoint(c) == bytes);
    CHECK(c.p.names == model::init_params<float>(cfg.model, cfg.seed).names);
  }
}
