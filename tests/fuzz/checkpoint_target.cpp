#include "tests/fuzz/checkpoint_target.hpp"

#include "core/io/crc32.hpp"
#include "core/train/checkpoint.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace vla::fuzz {

namespace {

// The input's frame, parsed here: format version, config JSON, and the rest up to the checksum.
struct Frame {
  char version = 0;
  std::string_view json, rest;
  std::string problem;  // non-empty: the reader accepted bytes without a frame
};
Frame frame_of(std::string_view b) {
  Frame f;
  if (b.size() < 16 || b.substr(0, 7) != "VLACKPT" || (b[7] != '1' && b[7] != '2')) {
    f.problem = "accepted without the magic VLACKPT1 or VLACKPT2";
    return f;
  }
  f.version = b[7];
  const std::size_t end = b.size() - (f.version == '2' ? 4 : 0);
  if (f.version == '2') {
    std::uint32_t stored;
    std::memcpy(&stored, b.data() + end, 4);
    if (io::crc32(b.substr(0, end)) != stored) f.problem = "a format 2 file accepted with a wrong checksum";
  }
  std::uint64_t len;
  std::memcpy(&len, b.data() + 8, 8);
  if (len > end - 16) {
    f.problem = fmt::format("accepted with a config JSON of {} bytes in a {}-byte file", len, b.size());
    return f;
  }
  f.json = b.substr(16, len);
  f.rest = b.substr(16 + len, end - 16 - len);
  return f;
}

bool is_knob(const std::string& key) {
  MixerConfig defaults;
  bool found = false;
  for_each_knob(defaults, [&](const auto& k) { found = found || k.name == key; });
  return found;
}

std::string agrees_with_input(const train::Checkpoint& c, std::string_view bytes) {
  const Frame in = frame_of(bytes);
  if (!in.problem.empty()) return in.problem;
  const std::string again = train::encode_checkpoint(c);
  const Frame out = frame_of(again);
  if (!out.problem.empty()) return "the accepted checkpoint encodes to a file without a frame: " + out.problem;
  if (in.rest != out.rest) return "the step, log or tensors decoded differ from the file's";

  const auto ji = nlohmann::json::parse(in.json);  // accepted, so it parses
  auto jo = nlohmann::json::parse(out.json);
  if (!jo.contains("device")) jo["device"] = "cpu";  // written only when not "cpu"
  for (const auto& [key, value] : ji.items())
    if (!jo.contains(key) || jo[key] != value)
      return fmt::format("config key '{}' decoded as {}, the file holds {}", io::escape_bytes(key),
                         jo.contains(key) ? io::escape_bytes(jo[key].dump()) : "nothing", io::escape_bytes(value.dump(), 64));
  for (const auto& [key, value] : jo.items())
    if (!ji.contains(key) && key != "device" && !is_knob(key)) return fmt::format("config key '{}' is not in the file", key);

  for (const auto* P : {&c.p, &c.opt.m, &c.opt.v})
    for (const auto& t : P->t)
      for (Eigen::Index k = 0; k < t.size(); ++k)
        if (!std::isfinite(t.data()[k]) || (P == &c.opt.v && t.data()[k] < 0))
          return fmt::format("accepted a tensor holding {}", t.data()[k]);
  return {};
}

}  // namespace

Verdict check_checkpoint(std::string_view bytes) {
  const std::string source = fmt::format("{}: 'fuzz/checkpoint.bin'", kCheckpointParameter);
  return accept_or_refuse(kCheckpointParameter, [&] { return agrees_with_input(train::decode_checkpoint(bytes, source), bytes); });
}

}  // namespace vla::fuzz
