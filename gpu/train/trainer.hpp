#pragma once
// GPU training: the GPU step engine (GpuModel behind core/train/step_engine.hpp's interface) for the one
// training loop of core/train/trainer.cpp, so a GPU run has the CPU run's schedule, clip, evaluation,
// log (S/A norms included), checkpoint.bin (device "cuda"), SIGINT stop and resume. One batch per step
// on the device (no shards: the batch is one set of GEMMs), so CPU and GPU agree to rounding, not bit
// for bit; a GPU run resumed on the GPU equals the uninterrupted GPU run bit for bit.
#include "core/train/trainer.hpp"

#include <cuda_runtime.h>

#include <filesystem>
#include <functional>

namespace vla::gpu::train {

using GpuTrainResult = vla::train::TrainResult;

// The device "cuda": each engine's kernels, copies and GEMMs go to `stream` (null: the legacy default
// stream). make() rejects (naming the parameter) a configuration without a GPU path, and with no CUDA
// device visible says so, before the loop writes anything.
vla::train::Device cuda_device(cudaStream_t stream = nullptr);

// vla::train::train / resume on cuda_device(stream). out_dir empty: write nothing.
GpuTrainResult train_gpu(const vla::train::TrainConfig& cfg, const std::filesystem::path& out_dir,
                         const vla::train::RunOptions& ro, cudaStream_t stream = nullptr);
GpuTrainResult resume_gpu(const std::filesystem::path& out_dir, const vla::train::RunOptions& ro, cudaStream_t stream = nullptr);
// As above with a progress line every ~10% of the steps (a GPU step takes milliseconds).
GpuTrainResult train_gpu(const vla::train::TrainConfig& cfg, const std::filesystem::path& out_dir,
                         const std::function<void(const std::string&)>& progress = {}, cudaStream_t stream = nullptr);

// Many independent runs (seeds x configurations) sharing one GPU in one process: one host thread and one
// non-blocking CUDA stream per run, so one run's kernels fill the gaps of another's (a single run of the
// small model leaves the GPU mostly idle: its step is ~40 small launches and host round trips). Each
// run computes exactly what it computes alone (its own buffers, cuBLAS handle and stream; no atomics),
// which tests/gpu/test_gpu_train.cpp checks bit for bit. dirs[i] as train_gpu's out_dir (each run its own
// folder, checkpoint and log). ro.stop_after and ro.interrupt stop every run (ro.progress is not used:
// progress gets every run's lines, prefixed "run i: ").
std::vector<GpuTrainResult> train_gpu_many(const std::vector<vla::train::TrainConfig>& cfgs,
                                           const std::vector<std::filesystem::path>& dirs,
                                           const std::function<void(const std::string&)>& progress = {},
                                           const vla::train::RunOptions& ro = {});
// Continues the GPU runs in dirs (each as resume_gpu), concurrently as train_gpu_many.
std::vector<GpuTrainResult> resume_gpu_many(const std::vector<std::filesystem::path>& dirs,
                                            const std::function<void(const std::string&)>& progress = {},
                                            const vla::train::RunOptions& ro = {});

}  // namespace vla::gpu::train
