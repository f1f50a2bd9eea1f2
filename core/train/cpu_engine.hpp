#pragma once
// The CPU step engine: the model's loss and gradient data-parallel over the batch on host threads, and
// AdamW on the host (core/train/adamw.hpp).
//
// Determinism. The batch is split into kShards fixed shards (independent of the thread count); each
// shard sums its sequences' gradients in order into its own buffer, and the shards are added in shard
// order. Threads only decide which core computes a shard, never the order of any sum, so the same
// seed gives the same loss curve to the bit on any number of threads (same binary, same machine).
#include "core/model/transformer.hpp"
#include "core/train/step_engine.hpp"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace vla::train {

inline constexpr int kShards = 8;

// Loss and (when grad != nullptr) the mean gradient of a batch; threads 0: all cores.
BatchResult batch_gradient(const model::ModelConfig& cfg, const model::Params<float>& p, const Batch& b,
                           model::Params<float>* grad, int threads);

// batch_gradient in its two halves, for an engine that computes the shards in several places
// (data_parallel.hpp). Shard i holds the sequences [i B / kShards, (i + 1) B / kShards) of the batch.
struct ShardResult {
  model::Params<float> g;      // the sum of its sequences' gradients (each scaled by 1 / the batch's targets);
                               // empty when no gradient was asked for
  double loss = 0;             // the sum of its sequences' target losses (unscaled)
  int correct = 0;             // its exactly predicted targets
  std::vector<double> S, A;    // (L) the sums over its sequences of the head-mean ||S_T||_F, ||A_T||_F
  std::string nonfinite;       // its first non-finite activation, empty if none
};
// The shards `which` (indices in [0, kShards)) of batch b, on `threads` threads (0: all cores).
std::vector<ShardResult> shard_gradients(const model::ModelConfig& cfg, const model::Params<float>& p, const Batch& b,
                                         const std::vector<int>& which, bool gradient, int threads);
// The batch's result from all kShards shards (shards[i] is shard i), added in shard order: the one
// order every engine on the CPU uses. With grad, the mean gradient is moved into *grad.
BatchResult reduce_shards(const model::ModelConfig& cfg, std::vector<ShardResult>& shards, const Batch& b,
                          model::Params<float>* grad);

// The CPU engine (batch_gradient, adamw_update), computing each batch with `batch` (threads are passed on).
using BatchFunction = std::function<BatchResult(const model::ModelConfig&, const model::Params<float>&, const Batch&,
                                                model::Params<float>* grad, int threads)>;
std::unique_ptr<StepEngine> make_cpu_engine(const TrainConfig& c, int threads, BatchFunction batch = batch_gradient);

// The device "cpu": batch_gradient on RunOptions::threads threads, then adamw_update.
Device cpu_device();

}  // namespace vla::train
