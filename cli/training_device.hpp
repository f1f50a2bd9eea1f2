#pragma once
// The training device a command names with --device: the CPU engine (core/train), or the GPU's
// (gpu/train) when this build has the CUDA path.
#include "core/train/trainer.hpp"
#ifdef VLA_HAVE_CUDA
#include "gpu/train/trainer.hpp"
#endif

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace vla::cli {

inline train::Device training_device(const std::string& name) {
  if (name == "cpu") return train::cpu_device();
  if (name != "cuda") throw std::invalid_argument(fmt::format("--device: '{}' (allowed: cpu, cuda)", name));
#ifdef VLA_HAVE_CUDA
  return gpu::train::cuda_device();
#else
  throw std::invalid_argument("--device: cuda is not available, this build has no CUDA path (nvcc was not found)");
#endif
}

}  // namespace vla::cli
