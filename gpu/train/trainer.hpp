#pragma once
// The training loop of core/train/trainer.cpp on the GPU: same batches (make_batch(seed, step)), same
// AdamW, schedule and global-norm clip, one batch per step on the device (no shards: the batch is one
// set of GEMMs). Writes DIR/log.csv (step, loss, train_accuracy, lr, grad_norm, eval_accuracy,
// step_ms) and DIR/summary.json. No checkpoint/resume on the GPU path (docs/gpu.md).
#include "core/train/trainer.hpp"

#include <cuda_runtime.h>

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

// out_dir empty: write nothing. progress: one line every ~10% of the steps, or empty. stream: the CUDA
// stream the run's work goes to (null: the legacy default stream).
GpuTrainResult train_gpu(const vla::train::TrainConfig& cfg, const std::filesystem::path& out_dir,
                         const std::function<void(const std::string&)>& progress = {}, cudaStream_t stream = nullptr);

// Many independent runs (seeds x configurations) sharing one GPU in one process: one host thread and one
// non-blocking CUDA stream per run, so one run's kernels fill the gaps of another's (a single run of the
// small model leaves the GPU mostly idle: its step is ~40 small launches and host round trips). Each
// run computes exactly what it computes alone (its own buffers, cuBLAS handle and stream; no atomics),
// which tests/gpu/test_gpu_train.cpp checks bit for bit. dirs[i] as train_gpu's out_dir.
std::vector<GpuTrainResult> train_gpu_many(const std::vector<vla::train::TrainConfig>& cfgs,
                                           const std::vector<std::filesystem::path>& dirs,
                                           const std::function<void(const std::string&)>& progress = {});

}  // namespace vla::gpu::train
