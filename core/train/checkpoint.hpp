#pragma once
// checkpoint.bin, the state a run resumes from, written atomically. Format 2 (what this build writes):
//   magic "VLACKPT2", u64 length of the config JSON, the config JSON, i64 step, f64 wall time,
//   i64 AdamW step, u64 log rows, u64 log columns, the log rows (f64), then the parameters and the two
//   AdamW moments as (i64 rows, i64 cols, float data) per tensor in init_params's order, and last the
//   u32 CRC-32 (core/io/crc32.hpp) of every byte before it.
// Format 1 (magic "VLACKPT1", the toolkit's first releases) is format 2 without the checksum; it is
// still read, with every check but the checksum's. Numbers are little-endian (the machines the toolkit
// runs on). The device is a key "device" of the config JSON, written only when it is not "cpu": a CPU
// checkpoint keeps the key-less format, and any checkpoint without the key loads as "cpu". A mixer knob
// the config lacks loads as its default (TrainConfig::from_json).
//
// Reading trusts nothing in the file: a checkpoint is refused (std::invalid_argument naming --resume
// and the file, file bytes quoted through io::escape_bytes) when its checksum differs (format 2: any
// change after writing, truncation included), when it is not a checkpoint, of an unknown version,
// truncated, longer than its contents, or when its config JSON does not parse or is not a valid
// config, its sizes disagree with the file or its config (the log has one row per step, the tensors
// init_params's shapes), or a parameter or moment is non-finite (a second moment negative). Sizes are
// checked against the bytes present before anything of that size is allocated.
#include "core/model/params.hpp"
#include "core/train/adamw.hpp"
#include "core/train/train_config.hpp"

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace vla::train {

struct Checkpoint {
  TrainConfig cfg;
  std::string device = "cpu";
  int step = 0;
  double wall_s = 0;
  std::vector<std::vector<double>> log;  // log.csv's rows, from step 1
  model::Params<float> p;
  AdamWState<float> opt;
};

// The bytes of checkpoint.bin (format 2).
std::string encode_checkpoint(const Checkpoint& c);
// Parses checkpoint bytes (format 1 or 2) with every check above; `source` begins every refusal
// (read_checkpoint passes "--resume: '<path>'").
Checkpoint decode_checkpoint(std::string_view bytes, const std::string& source);

void write_checkpoint(const std::filesystem::path& path, const Checkpoint& c);
// The whole checkpoint. Throws std::invalid_argument naming `flag` (the option that named the file) and the
// file if path is missing or the file is refused (above).
Checkpoint read_checkpoint(const std::filesystem::path& path, std::string_view flag = "--resume");
// The config and the device, after the same checks as read_checkpoint (step, log and tensors left empty).
Checkpoint read_checkpoint_header(const std::filesystem::path& path);

}  // namespace vla::train
