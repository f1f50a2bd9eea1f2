#pragma once
// The training loop of core/train/trainer.cpp on the GPU: same batches (make_batch(seed, step)), same
// AdamW, schedule and global-norm clip, one batch per step on the device (no shards: the batch is one
// set of GEMMs). Writes DIR/log.csv (step, loss, train_accuracy, lr, grad_norm, eval_accuracy,
// step_ms) and DIR/summary.json. No checkpoint/resume on the GPU path (docs/gpu.md).
#include "core/train/trainer.hpp"

#include <filesystem>
#include <functional>

namespace vla::gpu::train {

struct GpuTrainResult {
  std::vector<double> losses;     // every step's loss, from step 1
  double final_loss = 0.0;
  double eval_accuracy = 0.0;     // held-out batches, as the CPU trainer's evaluation
  double wall_s = 0.0;
  double step_ms = 0.0;           // mean wall time of a step (data generation, upload, fwd+bwd, update)
  model::Params<float> params;
};

// out_dir empty: write nothing. progress: one line every ~10% of the steps, or empty.
GpuTrainResult train_gpu(const vla::train::TrainConfig& cfg, const std::filesystem::path& out_dir,
                         const std::function<void(const std::string&)>& progress = {});

}  // namespace vla::gpu::train
