#pragma once
// The training device a command names with --device: the CPU engine (core/train), or the GPU's
// (gpu/train) when this build has the CUDA path.
#include "core/train/trainer.hpp"
#ifdef VLA_HAVE_CUDA
#include "gpu/train/trainer.hpp"
#endif
#ifdef VLA_HAVE_NCCL
#include "gpu/train/data_parallel.hpp"
#endif

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace vla::cli {

// "cpu", "cuda" (one GPU) or "cuda:N" (one model data-parallel over GPUs 0 .. N - 1, gpu/train/data_parallel.hpp).
inline train::Device training_device(const std::string& name) {
  if (name == "cpu") return train::cpu_device();
  [[maybe_unused]] int gpus = 1;  // read only where this build has the CUDA path
  const std::string n = name.rfind("cuda:", 0) == 0 ? name.substr(5) : "";
  const bool digits = !n.empty() && n.size() <= 3 && n.find_first_not_of("0123456789") == std::string::npos;
  if (digits) gpus = std::stoi(n);
  if (name != "cuda" && !(digits && gpus >= 1))
    throw std::invalid_argument(fmt::format("--device: '{}' (allowed: cpu, cuda, cuda:N with N >= 1 GPUs)", name));
#ifdef VLA_HAVE_CUDA
  if (gpus == 1) return gpu::train::cuda_device();
#ifdef VLA_HAVE_NCCL
  return gpu::train::cuda_data_parallel_device(gpus);
#else
  throw std::invalid_argument(fmt::format("--device: {} is not available, this build has no NCCL (data parallel over GPUs needs it)", name));
#endif
#else
  throw std::invalid_argument(fmt::format("--device: {} is not available, this build has no CUDA path (nvcc was not found)", name));
#endif
}

}  // namespace vla::cli
