#pragma once
// The GPU side of `vla layer-forward --device cuda`: the foundation's .npy contract (single head,
// X (T, d_model) -> Y (T, d_model), y_t = W_o o_t + b_o) run on the CUDA kernels in fp32.
// Implemented in gpu/ (compiled only with CUDA); the CLI calls it under VLA_HAVE_CUDA.
#include "core/layers/mixer_layer.hpp"
#include "core/rules/registry.hpp"

namespace vla::gpu {

// Runs one single-head layer of mixer cfg.mixer over X on the current CUDA device.
// w holds the layer's weights in fp32 (shapes as MixerWeights documents, heads = 1).
// If trace is non-null it receives one StepStats per step (S_fro, A_fro, delta where the rule has them).
// Throws std::runtime_error (with the CUDA error string) on any CUDA failure, std::invalid_argument
// for a mixer or shape the GPU path does not support.
Mat<float> layer_forward(const MixerConfig& cfg, const LayerShape& shape, const MixerWeights<float>& w,
                         const Mat<float>& X, std::vector<StepStats>* trace);

}  // namespace vla::gpu
