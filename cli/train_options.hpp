#pragma once
// The options of `vla train`: core/train/train_config.hpp TrainConfig (task, model and its mixer's knobs,
// optimiser schedule; the paper's defaults, Tables 3, 6, and 2000 steps), the options that control a
// run (checkpoints, a resumable stop), and the SIGINT stop.
#include "cli/mixer_options.hpp"
#include "core/rules/gpu_support.hpp"
#include "core/train/trainer.hpp"

#include <CLI/CLI.hpp>

#include <atomic>
#include <csignal>

namespace vla::cli::detail {
inline std::atomic<bool> sigint_received{false};  // lock-free: safe to set from a signal handler
}  // namespace vla::cli::detail
extern "C" inline void vla_cli_on_sigint(int) { vla::cli::detail::sigint_received = true; }

namespace vla::cli {

inline void add_training_options(CLI::App& app, train::TrainConfig& c) {
  c.steps = 2000;
  app.add_option("--task", c.task.task, "mqar | copy")->capture_default_str();
  app.add_option("--mixer", c.model.mixer.mixer, fmt::format("{} (cuda: {})", kMixerNames, vla::gpu_mixer_names(vla::GpuUse::Training)))
      ->capture_default_str();
  app.add_option("--pairs", c.task.pairs, "MQAR: number of key-value pairs n (T = 3n + 1 unless --seq-len)")->capture_default_str();
  app.add_option("--seq-len", c.task.seq_len, "copy: sequence length T (even); MQAR: T >= 3n + 1 (default 3n + 1; "
                                                     "longer: filler between the pairs and the queries, docs/training.md)")->capture_default_str();
  app.add_option("--steps", c.steps, "optimiser steps")->capture_default_str();
  app.add_option("--batch", c.batch, "sequences per step")->capture_default_str();
  app.add_option("--seed", c.seed, "seed of weights and training batches")->capture_default_str();
  app.add_option("--eval-every", c.eval_every, "evaluate every K steps (0: at the end only)")->capture_default_str();
  app.add_option("--eval-batches", c.eval_batches, "held-out evaluation batches of 64")->capture_default_str();
  app.add_flag("--ood", c.ood, "MQAR: evaluate with keys from {64..126} (Table 13)");
  app.add_option("--d-model", c.model.d_model, "model width")->capture_default_str();
  app.add_option("--heads", c.model.heads, "heads")->capture_default_str();
  app.add_option("--d-head", c.model.d_head, fmt::format("head width (cuda: {}; softmax {})", fmt::join(vla::kGpuRecurrentHeads, ", "), fmt::join(vla::kGpuSoftmaxHeads, ", ")))->capture_default_str();
  app.add_option("--ffn", c.model.ffn, "FFN width")->capture_default_str();
  app.add_option("--layers", c.model.layers, "blocks")->capture_default_str();
  app.add_option("--max-len", c.model.max_len, "rows of the learnable positional embedding: the longest T the model takes")
      ->capture_default_str();
  app.add_option("--lr", c.opt.lr, "peak learning rate")->capture_default_str();
  // The training backward is rank 1 (ModelConfig::validate): no --rank.
  add_mixer_options(app, c.model.mixer, {"rank"});
}

// --checkpoint-every K and --stop-after N (stop resumably after N steps, as SIGINT does).
inline void add_run_control_options(CLI::App& app, train::TrainConfig& c, int& stop_after) {
  app.add_option("--checkpoint-every", c.checkpoint_every, "checkpoint every K steps")->capture_default_str();
  app.add_option("--stop-after", stop_after, "stop (resumably) after this many steps, as SIGINT would");
}

// From now on SIGINT asks the training to stop after its current step, leaving a resumable checkpoint
// and a consistent log (train::RunOptions::interrupt is the returned flag).
inline const std::atomic<bool>* stop_on_sigint() {
  std::signal(SIGINT, vla_cli_on_sigint);
  return &detail::sigint_received;
}

}  // namespace vla::cli
