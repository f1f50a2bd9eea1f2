// A corrupted checkpoint.bin never resumes: truncated, bit-flipped, not a checkpoint, of an unknown
// version, with absurd sizes, a config JSON that does not parse or is not a valid config, tensors
// that do not match the config, non-finite parameters or moments. Each is refused by train::resume
// with std::invalid_argument naming --resume and the file (file bytes quoted escaped), before
// anything is written; never a crash, a huge allocation, a silent resume of a changed run.
// Checkpoints of format 1 (no checksum) still resume.
#include "tests/fuzz/checkpoint_files.hpp"

#include "core/io/escape.hpp"
#include "core/train/trainer.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

using namespace vla;
namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / fmt::format("vla_checkpoint_test_{}_{}", name, ::getpid());
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The frame with one key of its config JSON replaced (the JSON dumped again, the checksum renewed).
fuzz::CheckpointFrame with_key(fuzz::CheckpointFrame f, const std::string& key, const nlohmann::json& value) {
  auto j = nlohmann::json::parse(f.json);
  j[key] = value;
  f.json = j.dump();
  return f;
}

struct Case {
  std::string what;    // the corruption
  std::string bytes;   // the file
  std::string phrase;  // the refusal must contain it
};

}  // namespace

TEST_CASE("a corrupted checkpoint refuses to resume, naming --resume and the file, and writes nothing", "[train][checkpoint]") {
  // If this fails, `vla train --resume` on a damaged checkpoint.bin crashes, allocates what the file
  // claims, prints raw file bytes, or silently continues a run that is not the one that was stopped.
  const train::TrainConfig cfg = fuzz::tiny_train_config("vla");
  const std::string good = fuzz::trained_checkpoint(cfg, 3);
  const fuzz::CheckpointFrame f = fuzz::CheckpointFrame::of(good);
  const std::vector<std::size_t> tensors = f.tensor_offsets();
  REQUIRE(tensors.size() == 3 * (4 + 20 * std::size_t(cfg.model.layers)));
  const std::size_t wq = tensors[2 + 2];  // block0.Wq of the parameters, (4, 4)
  const std::size_t v0 = tensors[2 * tensors.size() / 3];  // tok_emb of the second moment
  REQUIRE(f.get<std::int64_t>(wq) == 4);

  auto edited = [&](auto&& edit) {
    fuzz::CheckpointFrame g = f;
    edit(g);
    return g.bytes();
  };
  auto flip = [&](std::size_t at, int bit) {
    std::string b = good;
    b[at] = char(b[at] ^ (1 << bit));
    return b;
  };
  const std::size_t json_at = 16, body_at = 16 + f.json.size();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // A JSON length of 2^63 with the checksum renewed (the frame keeps the true length, so by hand).
  std::string huge_json_length = good.substr(0, good.size() - 4);
  huge_json_length.replace(8, 8, std::string("\0\0\0\0\0\0\0\x80", 8));
  const std::uint32_t crc = io::crc32(huge_json_length);
  huge_json_length.append(reinterpret_cast<const char*>(&crc), 4);
  // A checkpoint at step 0 (no log): a config with 2^31 - 1 layers then reaches the tensors' check.
  const fuzz::CheckpointFrame f0 = fuzz::CheckpointFrame::of(fuzz::trained_checkpoint(cfg, 0));
  std::vector<Case> cases{
      {"an empty file", "", "not a VLA training checkpoint"},
      {"another file", "GARBAGE!" + good.substr(8), "not a VLA training checkpoint: it begins with 'GARBAGE!'"},
      {"terminal escapes in the magic", "\x1b[2J\xff\x80VL" + good.substr(8), "it begins with '\\x1b[2J\\xff\\x80VL'"},
      {"an unknown format version", "VLACKPT9" + good.substr(8), "format version '9'"},
      {"truncated inside the magic", good.substr(0, 5), "not a VLA training checkpoint"},
      {"truncated after the magic", good.substr(0, 8), "truncated"},
      {"truncated inside the config", good.substr(0, json_at + 10), "truncated"},
      {"truncated inside a tensor", good.substr(0, body_at + wq + 30), "truncated"},
      {"truncated by one byte", good.substr(0, good.size() - 1), "truncated"},
      {"one bit flipped in a parameter", flip(body_at + wq + 16 + 5, 0), "CRC-32"},
      {"one bit flipped in the config (steps 6 -> 7)", flip(json_at + f.json.find("\"steps\":6") + 8, 0), "CRC-32"},
      {"one bit flipped in the step count", flip(body_at, 2), "CRC-32"},
      {"a byte appended", good + "\n", "CRC-32"},
      // Edits behind a valid checksum: what only the structure's checks catch (and a format 1 file).
      {"a config length of 2^63", huge_json_length, "the config JSON needs 9223372036854775808 x 1 bytes"},
      {"a config that does not parse", edited([](auto& g) { g.json[0] = '\xff'; }), "its config JSON does not parse"},
      {"a config that is not an object", edited([](auto& g) { g.json = "[1, 2]"; }), "must be a JSON object"},
      {"a config that fails validation (d_model 0)", with_key(f, "d_model", 0).bytes(), "--d-model: must be >= 1"},
      {"a config value of the wrong type (layers \"1\")", with_key(f, "layers", "1").bytes(), "layers: must be an integer"},
      {"a config value out of range (d_model 2^40)", with_key(f, "d_model", 1LL << 40).bytes(), "d_model: must be an integer"},
      {"a config key missing", edited([](auto& g) { auto j = nlohmann::json::parse(g.json); j.erase("ffn"); g.json = j.dump(); }),
       "ffn: missing"},
      {"a config key unknown", with_key(f, "learning_rate", 0.1).bytes(), "a key this build does not know: 'learning_rate'"},
      {"a config lr of 0", with_key(f, "lr", 0).bytes(), "--lr: must be a finite number > 0"},
      {"a knob out of range (lambda0 -1)", with_key(f, "lambda0", -1).bytes(), "lambda0: must be a finite number > 0"},
      {"a device with terminal escapes", with_key(f, "device", "\x1b[2J").bytes(), "device '\\x1b[2J' is not a device name"},
      {"a model larger than the file (d_model 2^30)", with_key(f, "d_model", 1 << 30).bytes(), "its config's model has"},
      {"a model with 2^31 - 1 layers", with_key(f, "layers", std::numeric_limits<int>::max()).bytes(), "its log has 3 rows of 8 values"},
      {"a model with 2^31 - 1 layers at step 0", with_key(f0, "layers", std::numeric_limits<int>::max()).bytes(),
       "truncated or corrupted: its config's 2147483647-layer model has 3 x 42949672944 tensors"},
      {"a model other than the tensors' (d_model 16)", with_key(f, "d_model", 16).bytes(), "its config's model has"},
      {"the step beyond the config's steps", edited([](auto& g) { g.template set<std::int64_t>(0, 7); }), "its step 7 is outside 0..6"},
      {"a negative step", edited([](auto& g) { g.template set<std::int64_t>(0, -1); }), "its step -1 is outside"},
      {"a NaN wall time", edited([&](auto& g) { g.template set<double>(8, nan); }), "wall time nan"},
      {"an AdamW step other than the step", edited([](auto& g) { g.template set<std::int64_t>(16, 2); }), "AdamW step 2 differs"},
      {"2^62 log rows", edited([](auto& g) { g.template set<std::uint64_t>(24, 1ULL << 62); }), "its log has"},
      {"a log row of another step", edited([](auto& g) { g.template set<double>(40, 5.0); }), "log row 1 is (step 5"},
      {"a tensor of 2^62 rows", edited([&](auto& g) { g.template set<std::int64_t>(wq, 1LL << 62); }), "is (4611686018427387904, 4)"},
      {"a tensor of -1 rows", edited([&](auto& g) { g.template set<std::int64_t>(wq, -1); }), "is (-1, 4)"},
      {"a NaN parameter", edited([&](auto& g) { g.template set<float>(wq + 16 + 4 * 5, float(nan)); }),
       "tensor 'block0.Wq' of the parameters holds nan at (1, 1), a non-finite value"},
      {"an infinite first moment", edited([&](auto& g) { g.template set<float>(tensors[tensors.size() / 3] + 16, INFINITY); }),
       "tensor 'tok_emb' of the first moment holds inf"},
      {"an infinite second moment", edited([&](auto& g) { g.template set<float>(v0 + 16, INFINITY); }),
       "tensor 'tok_emb' of the second moment holds inf"},
      {"a negative second moment", edited([&](auto& g) { g.template set<float>(v0 + 16 + 4, -1e-3f); }),
       "a second moment is a mean of squares"},
      {"bytes after the last tensor", edited([](auto& g) { g.body += std::string(8, '\0'); }), "8 bytes follow its last tensor"},
  };
  // The same structural edits in a format 1 file (no checksum) reach the same checks.
  fuzz::CheckpointFrame v1 = with_key(f, "d_model", 0);
  v1.version = '1';
  cases.push_back({"format 1: a config that fails validation", v1.bytes(), "--d-model: must be >= 1"});
  v1 = f;
  v1.version = '1';
  v1.set<float>(v0 + 16, -1.0f);
  cases.push_back({"format 1: a negative second moment", v1.bytes(), "a second moment is a mean of squares"});

  const fs::path dir = scratch("corrupt");
  const std::string file = (dir / "checkpoint.bin").string();
  int refused = 0;
  for (const auto& c : cases) {
    INFO(c.what);
    { std::ofstream(file, std::ios::binary | std::ios::trunc) << c.bytes; }
    std::string message;
    try {
      train::resume(dir, {});
      FAIL_CHECK("resumed");
    } catch (const std::invalid_argument& e) {
      message = e.what();
      ++refused;
    } catch (const std::exception& e) {
      FAIL_CHECK(fmt::format("{} instead of std::invalid_argument: {}", typeid(e).name(), io::escape_bytes(e.what())));
    }
    INFO(io::escape_bytes(message, 4096));
    CHECK(message.rfind("--resume: '" + file + "': ", 0) == 0);
    CHECK(message.find(c.phrase) != std::string::npos);
    CHECK(io::is_printable_ascii(message));
    CHECK(read_bytes(file) == c.bytes);  // untouched, and nothing written beside it
    CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}) == 1);
  }
  CHECK(refused == int(cases.size()));
  fs::remove_all(dir);
}

TEST_CASE("a checkpoint of format 1 (without the checksum) still resumes, to the uninterrupted run", "[train][checkpoint]") {
  // The toolkit's first releases wrote format 1; their runs must continue exactly.
  const train::TrainConfig cfg = fuzz::tiny_train_config("vla");
  fuzz::CheckpointFrame f = fuzz::CheckpointFrame::of(fuzz::trained_checkpoint(cfg, 3));
  f.version = '1';
  const fs::path dir = scratch("format1");
  { std::ofstream(dir / "checkpoint.bin", std::ios::binary) << f.bytes(); }
  const auto rest = train::resume(dir, {});
  CHECK(rest.steps_run == 3);
  CHECK(rest.losses == train::train(cfg, {}, {}).losses);
  CHECK(read_bytes(dir / "checkpoint.bin").rfind("VLACKPT2", 0) == 0);  // the continued run writes format 2
  fs::remove_all(dir);
}
