#pragma once
// checkpoint.bin, the state a run resumes from: a binary file written atomically; magic "VLACKPT1",
// u64 length of the config JSON, the config JSON, i64 step, f64 wall time, i64 AdamW step, u64 log rows,
// u64 log columns, the log rows (f64), then the parameters and the two AdamW moments as (i64 rows,
// i64 cols, float data) per tensor. The device is a key "device" of the config JSON, written only when
// it is not "cpu": a CPU checkpoint keeps the key-less format, and any checkpoint without the key loads
// as "cpu". A mixer knob the config lacks loads as its default (TrainConfig::from_json).
#include "core/model/params.hpp"
#include "core/train/adamw.hpp"
#include "core/train/train_config.hpp"

#include <filesystem>
#include <string>
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

void write_checkpoint(const std::filesystem::path& path, const Checkpoint& c);
// The whole checkpoint. Throws std::invalid_argument naming --resume if path is missing or not a
// checkpoint, std::runtime_error if it is truncated or its tensors do not match its config.
Checkpoint read_checkpoint(const std::filesystem::path& path);
// Only the config and the device (step, log and tensors left empty).
Checkpoint read_checkpoint_header(const std::filesystem::path& path);

}  // namespace vla::train
