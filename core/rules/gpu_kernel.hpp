#pragma once
// Which CUDA path serves a rule, and the kernels' parameters: what a rule's GPU trait
// (core/rules/<rule>/gpu.hpp, gpu_kernel(rule)) answers. Plain C++17, no Eigen and no CUDA, so that
// the kernels (gpu/*.cu, which include it through gpu/recurrent_forward.hpp) and core/ share it.
namespace vla {
namespace gpu {

// The fused recurrent kernels (gpu/recurrent_forward.hpp, gpu/recurrent_backward.hpp).
enum class RecurrentKind { Vla, Linear, DeltaNet };

struct RecurrentParams {
  // Hyper-parameters as core/rules name them (defaults = Algorithm 1's).
  float eps = 1e-4f;           // every denominator's floor (delta clamp, read denominator)
  float lambda0 = 0.1f;        // VLA: A_0 = I / lambda0
  int refresh_period = 20;     // VLA: A += refresh_eta I after step t when (t+1) % period == 0; 0 = off
  float refresh_eta = 1e-3f;
  bool normalise_key = true;   // VLA: k_hat = phi(k) / ||phi(k)|| (Alg. 1 line 9); false: k_hat = phi(k)
};

}  // namespace gpu

enum class GpuPath {
  None,       // no CUDA path: the rule runs on the CPU only
  Recurrent,  // a fused recurrent kernel (kind, params below): forward and backward
  Softmax,    // the softmax attention path (gpu/softmax_attention.hpp): cuBLAS products, training only
};

// The head widths the kernels are compiled (and tested) for.
inline constexpr int kGpuRecurrentHeads[] = {16, 32, 64, 96, 128};  // recurrent_forward and recurrent_backward
inline constexpr int kGpuSoftmaxHeads[] = {16, 32, 64, 128};  // softmax attention (any works; these are tested)

struct GpuKernel {
  GpuPath path = GpuPath::None;
  gpu::RecurrentKind kind = gpu::RecurrentKind::Linear;  // path == Recurrent
  gpu::RecurrentParams params;                           // path == Recurrent, from the rule's options
  bool gated = false;                                    // DeltaNet: the kernel reads gate logits
  // What the rule's options ask of a kernel; the kernels implement rank 1, the clamp of Alg. 1
  // line 13 and no S renormalisation (checked by gpu_kernel_for, core/rules/gpu_support.hpp).
  int rank = 1;
  bool clamp = true;
  bool renormalise = false;
  // A rule whose A is the constant a I (VLA with A fixed, run by DeltaNet's kernel, which tracks no A):
  // a > 0, and the training log's ||A||_F is a sqrt(d_h), as the CPU run logs it. 0: not such a rule.
  double constant_A = 0.0;
};

}  // namespace vla
