#pragma once
// The GPU side of `vla layer-forward --device cuda`: the foundation's .npy contract (single head,
// X (T, d_model) -> Y (T, d_model), y_t = W_o o_t + b_o) run on the CUDA kernels in fp32.
// Implemented in gpu/ (compiled only with CUDA); the CLI calls it under VLA_HAVE_CUDA.
#include "core/layers/mixer_layer.hpp"
#include "core/product_operands.hpp"
#include "core/rules/gpu_kernel.hpp"
#include "core/rules/registry.hpp"

#include <string>
#include <string_view>

namespace vla::gpu {

// Which kernel runs the recurrence (`--recurrent-form`): the fused recurrent kernel
// (gpu/recurrent_forward.hpp, every GPU mixer, with the per-step trace) or the chunkwise-parallel VLA
// forward (gpu/chunked_vla_forward.hpp: the `vla` preset with eps <= 1 at the head widths kChunkedVlaHeads,
// no trace).
// Auto takes the chunked form where it serves the request and T >= kChunkedLayerMinT, the fused one
// elsewhere.
enum class RecurrentForm { Auto, Fused, Chunked };
inline constexpr std::string_view kRecurrentFormNames = "auto, fused, chunked";
// One sequence of one head (d = 32) ran faster chunked from T = 512 on: fused / chunked 0.67, 0.95, 1.17,
// 1.30, 1.37, 1.46 at T = 128, 256, 512, 1024, 2048, 4096 on an H100 (`vla bench attention --batch 1
// --heads 1 --d-head 32`, docs/chunkwise-vla-gpu.md).
inline constexpr int kChunkedLayerMinT = 512;
// The form named `name` (one of kRecurrentFormNames); throws std::invalid_argument naming --recurrent-form.
RecurrentForm recurrent_form(const std::string& name);
std::string_view form_name(RecurrentForm f);
// The form a layer of kernel k at head width d over T tokens runs with, Auto resolved; `trace`: a per-step
// trace is asked for. Throws std::invalid_argument naming --recurrent-form where Chunked cannot serve it.
RecurrentForm resolve_form(RecurrentForm f, const GpuKernel& k, int d, int T, bool trace);
// Why the chunked forward (and the group-parallel backward) cannot serve kernel k at head width d, as a
// message naming --recurrent-form and what to change; empty where it can: VLA's kernel with k_hat
// normalised (the `vla` preset), d in kChunkedVlaHeads, eps <= 1 (the clamp never fires). The one
// definition of what the chunked kernels cover; chunked_serves is its emptiness.
std::string chunked_refusal(const GpuKernel& k, int d);
bool chunked_serves(const GpuKernel& k, int d);

// Runs one single-head layer of mixer cfg.mixer over X on the current CUDA device.
// w holds the layer's weights in fp32 (shapes as MixerWeights documents, heads = 1).
// If trace is non-null it receives one StepStats per step (S_fro, A_fro, delta where the rule has them).
// `form` picks the recurrence's kernel (resolve_form); if ran is non-null it receives the one that ran.
// `products` (`--products`): how the chunked form's tensor-core products read their operands
// (core/product_operands.hpp; tf32: one pass, ~5e-4 relative error, docs/chunkwise-vla-gpu.md); anything but
// Full where the recurrence resolves to the fused kernel is refused.
// Throws std::runtime_error (with the CUDA error string) on any CUDA failure, std::invalid_argument
// for a mixer, shape, form or products mode the GPU path does not support (before any CUDA call).
Mat<float> layer_forward(const MixerConfig& cfg, const LayerShape& shape, const MixerWeights<float>& w,
                         const Mat<float>& X, std::vector<StepStats>* trace, RecurrentForm form = RecurrentForm::Auto,
                         RecurrentForm* ran = nullptr, ProductOperands products = ProductOperands::Full);

}  // namespace vla::gpu
