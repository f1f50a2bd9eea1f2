#pragma once
// GPU training: the GPU step engine (GpuModel behind core/train/step_engine.hpp's interface) for the one
// training loop of core/train/trainer.cpp, so a GPU run has the CPU run's schedule, clip, evaluation,
// log (S/A norms included), checkpoint.bin (device "cuda"), SIGINT stop and resume. One batch per step
// on the device (no shards: the batch is one set of GEMMs), so CPU and GPU agree to rounding, not bit
// for bit; a GPU run resumed on the GPU equals the uninterrupted GPU run bit for bit.
#include "core/train/trainer.hpp"

#include <cuda_runtime.h>

#include <filesystem>

namespace vla::gpu::train {

using GpuTrainResult = vla::train::TrainResult;

// The device "cuda": each engine's kernels, copies and GEMMs go to `stream` (null: the legacy default
// stream). check (and make()) rejects, naming the parameter, a configuration without a GPU path
// (validate_gpu_config); make() with no CUDA device visible says so, before the loop writes anything.
// Many runs (vla::train::train_many / resume_many) share the GPUs in one process: one host thread and one
// non-blocking CUDA stream per run, so one run's kernels fill the gaps of another's (a single run of the
// small model leaves the GPU mostly idle: its step is ~40 small launches and host round trips), each run
// on the GPU that has the fewest runs of this process when it starts (every visible GPU is used). Each run
// computes exactly what it computes alone (its own buffers, cuBLAS handle and stream; no atomics), which
// tests/gpu/test_gpu_train.cpp checks bit for bit.
vla::train::Device cuda_device(cudaStream_t stream = nullptr);

// vla::train::train / resume on cuda_device(stream). out_dir empty: write nothing.
GpuTrainResult train_gpu(const vla::train::TrainConfig& cfg, const std::filesystem::path& out_dir,
                         const vla::train::RunOptions& ro = {}, cudaStream_t stream = nullptr);
GpuTrainResult resume_gpu(const std::filesystem::path& out_dir, const vla::train::RunOptions& ro = {},
                          cudaStream_t stream = nullptr);

}  // namespace vla::gpu::train
