#pragma once
// The CPU training loop (issue 4): float32 model, AdamW, warm-up + cosine schedule, global-norm
// clipping, data-parallel over the batch, checkpoints, CSV log, JSON summary, resume.
//
// Determinism. The batch is split into kShards fixed shards (independent of the thread count); each
// shard sums its sequences' gradients in order into its own buffer, and the shards are added in shard
// order. Threads only decide which core computes a shard, never the order of any sum, so the same
// seed gives the same loss curve to the bit on any number of threads (same binary, same machine).
#include "core/model/transformer.hpp"
#include "core/train/adamw.hpp"
#include "core/train/tasks.hpp"

#include <atomic>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

namespace vla::train {

inline constexpr int kShards = 8;

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

struct RunOptions {
  int threads = 0;                          // 0: std::thread::hardware_concurrency()
  int stop_after = -1;                      // stop (as if interrupted) after this many steps; -1 never
  const std::atomic<bool>* interrupt = nullptr;  // set by SIGINT: checkpoint and stop
  std::function<void(const std::string&)> progress;  // progress line, or empty
};

struct BatchResult {
  double loss = 0.0;         // mean CE over the batch's targets
  double accuracy = 0.0;     // exact match per target position
  std::vector<double> S_fro, A_fro;  // (L) batch means
  std::string nonfinite;     // first non-finite activation (sequence, block, tensor), empty if none
};

// Loss and (when grad != nullptr) the mean gradient of a batch.
BatchResult batch_gradient(const model::ModelConfig& cfg, const model::Params<float>& p, const Batch& b,
                           model::Params<float>* grad, int threads);

struct TrainResult {
  int steps_done = 0;
  bool interrupted = false;
  double final_loss = 0.0;
  double eval_accuracy = 0.0;
  double wall_s = 0.0;
  std::vector<double> losses;  // every step's loss, from step 1 (the log's loss column)
  model::Params<float> params;
};

// Runs (or, with resume, continues) the training in out_dir: checkpoint.bin, log.csv, summary.json.
TrainResult train(const TrainConfig& cfg, const std::filesystem::path& out_dir, const RunOptions& ro);
TrainResult resume(const std::filesystem::path& out_dir, const RunOptions& ro);

}  // namespace vla::train
