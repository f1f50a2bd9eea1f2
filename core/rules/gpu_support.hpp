#pragma once
// What the CUDA path can run, asked of the rules' GPU traits (core/rules/<rule>/gpu.hpp) and checked
// in one place for every command that runs a mixer on the GPU (`vla layer-forward --device cuda`,
// GPU training): which mixers have a kernel, the head widths the kernels are compiled for, and the
// options the kernels implement (rank 1, the delta clamp, no S renormalisation, no next-latent alignment). Errors name the
// command-line flag and what is allowed.
#include "core/rules/registry.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>

namespace vla {

enum class GpuUse {
  LayerForward,  // the fused forward kernel alone
  Training,      // forward and backward: the recurrent kernels or the softmax path
};

// The trait's answer for the rule cfg names, as configured.
inline GpuKernel gpu_kernel_of(const MixerConfig& cfg) {
  return with_rule<Precision<float>>(cfg, [](const auto& rule) { return gpu_kernel(rule); });
}

inline bool gpu_serves(GpuPath path, GpuUse use) {
  return path == GpuPath::Recurrent || (path == GpuPath::Softmax && use == GpuUse::Training);
}

// "vla, linear, ...": the mixers (with their default options) that have a GPU path for `use`.
inline std::string gpu_mixer_names(GpuUse use) {
  std::string out;
  for (const auto name : Rules::kNames) {
    MixerConfig cfg;
    cfg.mixer = std::string(name);
    if (!gpu_serves(gpu_kernel_of(cfg).path, use)) continue;
    out += (out.empty() ? "" : ", ") + cfg.mixer;
  }
  return out;
}

// Why no GPU kernel runs cfg's mixer at head width d_head for `use` (the message names the flag and what
// is allowed), or nothing when one does: the question a planner asks without catching an exception.
inline std::optional<std::string> gpu_unsupported(const MixerConfig& cfg, int d_head, GpuUse use) {
  const GpuKernel k = gpu_kernel_of(cfg);
  if (!gpu_serves(k.path, use))
    return fmt::format("--mixer: '{}' has no GPU {} (allowed with --device cuda: {})", cfg.mixer,
                       use == GpuUse::Training ? "training path" : "kernel", gpu_mixer_names(use));
  const std::span<const int> heads = k.path == GpuPath::Softmax ? std::span<const int>(kGpuSoftmaxHeads)
                                                                : std::span<const int>(kGpuRecurrentHeads);
  if (std::find(heads.begin(), heads.end(), d_head) == heads.end())
    return fmt::format("--d-head: {} has no GPU {} (allowed with --device cuda: {})", d_head,
                       k.path == GpuPath::Softmax ? "softmax path"
                       : use == GpuUse::Training  ? "backward kernel"
                                                  : "kernel",
                       fmt::join(heads, ", "));
  if (k.rank != 1) return fmt::format("--rank: the GPU kernel implements rank 1 (Algorithm 1) only, got {}", k.rank);
  if (!k.clamp) return std::string("--delta-policy: the GPU kernel implements Algorithm 1's clamp only (allowed: clamp)");
  if (k.renormalise) return std::string("--renormalise: the GPU kernels have no S renormalisation (allowed: off)");
  if (cfg.next_latent)
    return std::string("--next-latent: the GPU kernels write the same-step pair (k_t, v_t) (allowed with --device cuda: off)");
  return std::nullopt;
}

// The kernel that runs cfg's mixer at head width d_head for `use`, with its parameters; throws
// std::invalid_argument with gpu_unsupported's message when there is none.
inline GpuKernel gpu_kernel_for(const MixerConfig& cfg, int d_head, GpuUse use) {
  if (auto why = gpu_unsupported(cfg, d_head, use)) throw std::invalid_argument(*why);
  return gpu_kernel_of(cfg);
}

}  // namespace vla
