#pragma once
// The small causal LM of core/model/transformer.hpp on the GPU, fp32, over a whole batch at once:
//   X_0 = E[tokens] + P[0:T]; per block X += Mixer(LN1(X)), X += W2 GELU(W1 LN2(X) + b1) + b2;
//   logits = LNf(X) E^T (tied head); cross-entropy at the positions with a target, mean over the batch's
//   targets (as core/train/trainer.cpp's batch_gradient).
// Dense projections: gpu/gemm_3xtf32.hpp (fp32 accuracy on the tensor cores, the biases and their gradients
// in its epilogue), cuBLAS SGEMM in plain fp32 where it does not serve. Mixers: the fused recurrent
// forward/backward kernels of gpu/recurrent_{forward,backward}.hpp (vla, vla-no-knorm, vla-fixed-a on
// DeltaNet's, linear, deltanet; d_head in kGpuRecurrentHeads) and softmax attention (gpu/softmax_attention.hpp, cuBLAS + fused row kernels; d_head in
// {16, 32, 64, 128}); any other mixer is rejected naming the allowed ones.
// Parameters and gradients live in one flat device array each, tensor by tensor in the order of
// core/model/params.hpp's list, each tensor row-major (Eigen's host copies are column-major).
#include "core/model/params.hpp"
#include "core/train/adamw.hpp"
#include "core/train/tasks.hpp"
#include "gpu/layer_forward.hpp"  // RecurrentForm, chunked_serves

#include <cuda_runtime.h>

#include <memory>
#include <vector>

namespace vla::gpu::train {

struct GpuBatchResult {
  double loss = 0.0;      // CE summed over the batch's targets / step_targets (default: the batch's mean)
  double accuracy = 0.0;  // exact match per target position
  int targets = 0;        // positions with a target in this batch
  int correct = 0;        // of those, predicted exactly (accuracy = correct / targets)
  // (L) with backward (a training step), as the CPU's batch_gradient: batch mean of the per-sequence
  // mean over heads of ||S_T||_F, ||A_T||_F after the last token (the fused forward kernel's stats);
  // NaN for softmax (no state) and A for linear/deltanet (no A), and for both where the chunked pair ran
  // (it computes no per-token state norms). Without backward: empty.
  std::vector<double> S_fro, A_fro;
};

// Which kernels run VLA's recurrence (`vla train --device cuda --recurrent-form`): the fused pair
// (recurrent_forward + recurrent_backward, with the state norms of the log) or the chunked pair
// (chunked_vla_forward + chunked_vla_backward; the `vla` preset at d_head 32, eps <= 1: chunked_serves).
// Auto takes the chunked pair for at most max_seqs sequences (B H) of at least min_T tokens, for any tier
// below, where one run measured faster with it (1.27x or more at each tier's edge): fwd+bwd with training's
// kept workspace, on an H200 (`bash gpu/dev/train-tiers.sh`, 2026-11-28; docs/chunkwise-vla-gpu.md, "GPU backward in
// the chunk form"), fused / chunked ms: B H = 32: 0.179 / 0.141 at T = 32; B H = 128: 0.275 / 0.203 at T = 49;
// B H = 192: 0.285 / 0.293 at T = 49, 0.561 / 0.408 at 97. At T = 25 the two are within 3% up to B H = 128
// (0.142 / 0.138 at 32 and 64 sequences), where the fused pair stays: it also gives the log's state norms.
// Whole training steps agree (`TT_TRAIN=... bash gpu/dev/train-tiers.sh`: the chunked pair 11-26% faster per
// step at each tier's edge, 5-9% at 32 sequences of 25 tokens, a tie at 192 of 49).
// B H = 256 (the paper's batch) stays fused, though one run of it is faster chunked from T = 73 (1.05-1.28x):
// a study sweeps 16 such runs at once, and there the fused pair gives more run-steps per second (1.29-1.40x at
// T = 256 and 512 with the workspace kept; docs/chunkwise-vla-gpu.md). The choice is the run's alone (its
// shape), never the load of the GPU, so a run computes the same bits alone or in a sweep.
struct ChunkedTrainTier {
  int max_seqs, min_T;
};
inline constexpr ChunkedTrainTier kChunkedTrainTiers[] = {{32, 32}, {128, 49}, {192, 97}};
inline constexpr bool chunked_train_faster(int seqs, int T) {
  for (const ChunkedTrainTier& t : kChunkedTrainTiers)
    if (seqs <= t.max_seqs && T >= t.min_T) return true;
  return false;
}

class GpuModel {
 public:
  // Throws std::invalid_argument (naming the parameter) for a configuration the GPU path lacks.
  // stream: every kernel, copy and GEMM of this model runs on it (one stream per model lets several
  // independent runs share a GPU; null = the legacy default stream).
  // The model lives on the GPU current at construction (its buffers, stream and cuBLAS handle); every
  // member makes that GPU current for its duration, so any host thread may call it.
  // form: the recurrence's kernels (above); Chunked where chunked_refusal gives a reason throws it (--recurrent-form).
  GpuModel(const model::ModelConfig& cfg, const model::Params<float>& p, cudaStream_t stream = nullptr,
           RecurrentForm form = RecurrentForm::Auto);
  ~GpuModel();
  GpuModel(const GpuModel&) = delete;
  GpuModel& operator=(const GpuModel&) = delete;

  void set_params(const model::Params<float>& p);
  model::Params<float> params() const;
  model::Params<float> grads() const;  // the last forward_backward's mean gradient

  // Loss and accuracy of the batch; with backward, the mean gradient into the gradient array.
  // step_targets: the number of targets the loss and the gradient are averaged over; 0 = this batch's own.
  // A part of a data-parallel step passes the whole step's count, so that the parts' losses and
  // gradients add up to the step's mean (gpu/train/data_parallel.hpp).
  GpuBatchResult forward_backward(const vla::train::Batch& b, bool backward = true, int step_targets = 0);
  double grad_norm() const;  // global L2 norm of the gradient (double sum of per-block double partials)
  void synchronize() const;  // waits for everything queued on the model's stream
  // One AdamW update (core/train/adamw.hpp) with the gradient scaled by gscale (the global-norm clip).
  void adamw_step(const vla::train::AdamWConfig& c, double lr, double gscale);
  // The AdamW moments (into m, v, in the parameters' layout) and the number of updates applied, for a
  // checkpoint; and back (the step count sets the bias corrections of the next update).
  long adam_moments(model::Params<float>& m, model::Params<float>& v) const;
  void set_adam_moments(const model::Params<float>& m, const model::Params<float>& v, long step);

  // The flat gradient array on the model's GPU (n floats, written by forward_backward on stream), for
  // a collective that reduces it in place between replicas (gpu/train/data_parallel.cpp).
  struct DeviceArray {
    float* data;
    std::size_t n;
    cudaStream_t stream;
    int device;
  };
  DeviceArray gradient();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Throws std::invalid_argument naming the parameter if the GPU path cannot train this configuration
// with this form (Chunked where chunked_refusal gives a reason: naming --recurrent-form).
void validate_gpu_config(const model::ModelConfig& cfg, RecurrentForm form = RecurrentForm::Auto);

}  // namespace vla::gpu::train
