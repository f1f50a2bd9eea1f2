#pragma once
// Data-parallel training of one model over the GPUs of one host (`vla train --device cuda:N`), NCCL for
// the gradient's all-reduce.
//
// One process, one replica of the model per GPU (a GpuModel: parameters, AdamW moments, activations),
// one NCCL communicator per GPU (ncclCommInitAll). A step of B sequences gives GPU i the sequences
// [B i / N, B (i + 1) / N); every replica averages its part's loss and gradient over the whole step's
// targets, so that an in-place ncclAllReduce (sum) of the N gradient arrays leaves on every GPU the
// step's mean gradient; then each replica applies the same AdamW update to the same parameters, and the
// replicas stay equal bit for bit (an all-reduce hands every rank the same sums).
//
// What it equals. The one-GPU step computes the same sums in another order (one GEMM over all B T rows
// against N GEMMs over B T / N rows and an N-term sum), so an N-GPU run equals the one-GPU run to fp32
// rounding, not bit for bit: its gradient is held to the one-GPU gradient's own bound against the
// CPU's float64 gradient, and its loss curve to the bounds the one-GPU curve meets against the CPU's
// (tests/gpu/test_gpu_data_parallel.cpp). An N-GPU run is deterministic (the same N on the same kind of
// GPUs gives the same bits): its checkpoint records the device "cuda:N" and resumes on N GPUs to the
// uninterrupted run, as a one-GPU run's ("cuda") resumes on one.
//
// Where it pays: a step whose batch fills N GPUs (the wide model of docs/parallel.md). The paper's small
// model is latency-bound; it gains from several runs at once instead (trainer.hpp: concurrent runs
// spread over every visible GPU).
#include "core/model/params.hpp"
#include "core/train/adamw.hpp"
#include "core/train/step_engine.hpp"
#include "core/train/tasks.hpp"
#include "gpu/train/model.hpp"

#include <memory>

namespace vla::gpu::train {

// GpuModel's training interface over GPUs 0 .. gpus - 1, each holding a replica.
class DataParallelModel {
 public:
  // Throws std::invalid_argument naming --device when fewer than `gpus` (>= 2) GPUs are visible.
  DataParallelModel(const model::ModelConfig& cfg, const model::Params<float>& p, int gpus);
  ~DataParallelModel();
  DataParallelModel(const DataParallelModel&) = delete;
  DataParallelModel& operator=(const DataParallelModel&) = delete;

  int gpus() const;
  // The step's loss, accuracy and S/A norms (as GpuModel's over the whole batch); with backward, every
  // replica then holds the step's mean gradient. The batch needs at least gpus() sequences.
  GpuBatchResult forward_backward(const vla::train::Batch& b, bool backward = true);
  double grad_norm() const;  // replica 0's (every replica holds the same gradient)
  void adamw_step(const vla::train::AdamWConfig& c, double lr, double gscale);  // on every replica
  void synchronize() const;
  // Wall time of the last step's all-reduce (queued after the backward, waited for): for the benchmark.
  double last_all_reduce_ms() const;

  model::Params<float> params(int replica = 0) const;
  model::Params<float> grads(int replica = 0) const;
  void set_params(const model::Params<float>& p);  // into every replica
  long adam_moments(model::Params<float>& m, model::Params<float>& v) const;  // replica 0's
  void set_adam_moments(const model::Params<float>& m, const model::Params<float>& v, long step);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The device "cuda:<gpus>": one run at a time, data-parallel over GPUs 0 .. gpus - 1 (as
// CUDA_VISIBLE_DEVICES numbers them); gpus = 1 is cuda_device(), named "cuda". check() refuses, naming
// --batch, a batch or evaluation batch of fewer sequences than GPUs; make() also, naming --device, more
// GPUs than are visible.
vla::train::Device cuda_data_parallel_device(int gpus);

}  // namespace vla::gpu::train
