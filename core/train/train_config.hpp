#pragma once
// TrainConfig: what one training run is (model, task, optimiser schedule, steps, evaluation, checkpoint
// cadence), its validation and its JSON, the "config" of checkpoint.bin and summary.json.
#include "core/model/config.hpp"
#include "core/train/adamw.hpp"
#include "core/train/tasks.hpp"

#include <cstdint>
#include <nlohmann/json.hpp>

namespace vla::train {

struct TrainConfig {
  model::ModelConfig model;
  TaskConfig task;
  AdamWConfig opt;
  int steps = 1500;
  int batch = 64;
  std::uint64_t seed = 0;
  int eval_every = 0;        // 0: evaluate only at the end
  int eval_batches = 15;     // held-out batches of 64 (960 samples), seed different from training
  int eval_batch = 64;
  bool ood = false;          // evaluate MQAR with keys from {64..126} (Table 13)
  int checkpoint_every = 100;
  void validate() const;     // throws std::invalid_argument naming the parameter
  nlohmann::json to_json() const;
  static TrainConfig from_json(const nlohmann::json&);
};

}  // namespace vla::train
