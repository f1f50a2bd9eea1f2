#pragma once
// The training device a command names with --device: the CPU engine (core/train), or the GPU's
// (gpu/train) when this build has the CUDA path.
#include "core/rules/gpu_support.hpp"
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

// The device a run store's runs were trained on, for reading the store back without training (`vla study
// run --from-store`): its name picks the store's folder, and its check sends a run to the CPU's folder
// where the sweep that trained it did (for cuda, the rules' GPU traits, as the GPU trainer checks them).
// It makes no engine, so a build without the CUDA path reads a GPU sweep's store.
inline train::Device stored_device(const std::string& name) {
  if (name != "cpu" && name != "cuda")
    throw std::invalid_argument(fmt::format("--device: '{}' with --from-store (allowed: cpu, cuda: the store's folders)", name));
  train::Device d;
  d.name = name;
  if (name == "cuda")
    d.check = [](const train::TrainConfig& c) {
      c.model.validate();
      gpu_kernel_for(c.model.mixer, c.model.d_head, GpuUse::Training);  // throws where the GPU trainer would refuse the run
    };
  d.make = [](const train::TrainConfig&, const train::RunOptions&) -> std::unique_ptr<train::StepEngine> {
    throw std::logic_error("--from-store: a stored device trains nothing");
  };
  return d;
}

}  // namespace vla::cli
