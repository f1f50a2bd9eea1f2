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

namespace vla::train {

inline constexpr int kShards = 8;

// Loss and (when grad != nullptr) the mean gradient of a batch; threads 0: all cores.
BatchResult batch_gradient(const model::ModelConfig& cfg, const model::Params<float>& p, const Batch& b,
                           model::Params<float>* grad, int threads);

// The device "cpu": batch_gradient on RunOptions::threads threads, then adamw_update.
Device cpu_device();

}  // namespace vla::train
