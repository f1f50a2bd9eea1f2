// `vla bench chunked-vla --checkpoint`: the chunked VLA's accuracy and conditioning on the inputs a trained
// model's heads see, end to end through the built binary. A failure means the trained model's settings do not
// reach the measurement (its refresh, or a flag given to override it), the chunked form is not measured on those
// streams (in double it must equal Algorithm 1 to rounding), or a checkpoint the command cannot read (another
// mixer) or a flag it would silently ignore (--mixer) is not refused by name.
#include "cli_helpers.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

using namespace vla;
using namespace vla::test;

namespace {

std::string tiny_train(const std::string& mixer, const std::string& out) {
  return fmt::format("{} train --task mqar --pairs 4 --d-model 16 --heads 2 --d-head 8 --ffn 32 --layers 2 --steps 2 --batch 8 "
                     "--eval-batches 1 --threads 1 --mixer {} --out {}", kVla, mixer, out);
}

// The table's chunk rows: (chunk, double error), from lines "<chunk> | <double> <float> ...".
std::vector<std::pair<int, double>> double_errors(const std::string& out) {
  std::vector<std::pair<int, double>> r;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::istringstream l(line);
    int chunk = 0;
    std::string bar;
    double err = 0;
    if (l >> chunk >> bar >> err && bar == "|") r.emplace_back(chunk, err);
  }
  return r;
}

}  // namespace

TEST_CASE("vla bench chunked-vla --checkpoint: a trained model's heads, its settings, the chunked form exact in double", "[cli]") {
  ScratchDir dir("chunked-ckpt");
  const auto t = run_command(tiny_train("vla", dir / "vla"));
  INFO(t.output);
  REQUIRE(t.exit_code == 0);
  const std::string ckpt = dir / "vla/checkpoint.bin";
  const auto r = run_command(fmt::format("{} bench chunked-vla --checkpoint {} --sequences 2 --chunks 3,7", kVla, ckpt));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("2 sequences (seed 42) x 2 layers x 2 heads, d_h = 8, refresh period 20") != std::string::npos);
  CHECK(r.output.find("worst over the 8 head streams") != std::string::npos);
  CHECK(r.output.find("penalty directions u_t, per head") != std::string::npos);
  CHECK(r.output.find("layer 1: ") != std::string::npos);
  auto rows = double_errors(r.output);
  REQUIRE(rows.size() == 2);
  for (const auto& [chunk, err] : rows) {
    INFO("chunk " << chunk);
    CHECK(err < 1e-13);  // Algorithm 1 in double against mp50: a few u per entry (13 tokens, d = 8)
  }
  // A knob flag overrides the checkpoint's own setting.
  const auto off = run_command(fmt::format("{} bench chunked-vla --checkpoint {} --sequences 1 --chunks 13 --refresh-period 0", kVla, ckpt));
  INFO(off.output);
  REQUIRE(off.exit_code == 0);
  CHECK(off.output.find("refresh period 0") != std::string::npos);
  rows = double_errors(off.output);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].second < 1e-13);
  // Refused, by name: another mixer's checkpoint; --mixer beside --checkpoint.
  REQUIRE(run_command(tiny_train("deltanet", dir / "dn")).exit_code == 0);
  const auto dn = run_command(fmt::format("{} bench chunked-vla --checkpoint {}", kVla, dir / "dn/checkpoint.bin"));
  CHECK(dn.exit_code != 0);
  CHECK(dn.output.find("--checkpoint") != std::string::npos);
  CHECK(dn.output.find("deltanet") != std::string::npos);
  // A damaged checkpoint (one byte changed: its checksum fails) is refused naming this command's flag.
  {
    std::string bytes = read_file(dir.path / "vla/checkpoint.bin");
    bytes[bytes.size() / 2] ^= 0x5a;
    std::ofstream(dir / "bad.bin", std::ios::binary) << bytes;
  }
  const auto bad = run_command(fmt::format("{} bench chunked-vla --checkpoint {}", kVla, dir / "bad.bin"));
  CHECK(bad.exit_code != 0);
  CHECK(bad.output.find("--checkpoint: '") != std::string::npos);
  CHECK(bad.output.find("--resume") == std::string::npos);
  // --T with --checkpoint is the sequences' length: refused, naming --T, below the task's minimum or past the
  // model's positional table.
  for (const char* T : {"10", "300"}) {
    const auto r_t = run_command(fmt::format("{} bench chunked-vla --checkpoint {} --T {}", kVla, ckpt, T));
    INFO(r_t.output);
    CHECK(r_t.exit_code != 0);
    CHECK(r_t.output.find(fmt::format("--T: {} tokens", T)) != std::string::npos);
  }
  const auto mixer = run_command(fmt::format("{} bench chunked-vla --checkpoint {} --mixer vla-v2", kVla, ckpt));
  CHECK(mixer.exit_code != 0);
  CHECK(mixer.output.find("--mixer") != std::string::npos);
}
