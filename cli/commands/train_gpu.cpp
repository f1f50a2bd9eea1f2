// `vla train-gpu`: the small model of `vla train` trained on the GPU (gpu/train/trainer.hpp): same
// tasks, batches, AdamW, schedule and clip; fp32; mixers vla, linear, deltanet. Compiled only with
// the CUDA path (VLA_HAVE_CUDA); without it the command does not exist.
#ifdef VLA_HAVE_CUDA
#include "cli/command.hpp"
#include "gpu/train/trainer.hpp"

#include <fmt/format.h>

#include <cstdio>

namespace {

struct Args {
  vla::train::TrainConfig cfg;
  std::string out;
};

const vla::cli::RegisterCommand reg{
    "train-gpu", "Train the small causal LM (Tables 3, 6) on copy or MQAR on the GPU (fp32; vla, linear, deltanet)",
    [](CLI::App& app) {
      auto a = std::make_shared<Args>();
      auto& c = a->cfg;
      c.steps = 2000;
      app.add_option("--task", c.task.task, "mqar | copy")->capture_default_str();
      app.add_option("--mixer", c.model.mixer.mixer, "vla, linear, deltanet")->capture_default_str();
      app.add_option("--pairs", c.task.pairs, "MQAR: number of key-value pairs n (T = 3n + 1)")->capture_default_str();
      app.add_option("--seq-len", c.task.seq_len, "copy: sequence length T (even)")->capture_default_str();
      app.add_option("--steps", c.steps, "optimiser steps")->capture_default_str();
      app.add_option("--batch", c.batch, "sequences per step")->capture_default_str();
      app.add_option("--seed", c.seed, "seed of weights and training batches")->capture_default_str();
      app.add_option("--eval-every", c.eval_every, "evaluate every K steps (0: at the end only)")->capture_default_str();
      app.add_option("--eval-batches", c.eval_batches, "held-out evaluation batches of 64")->capture_default_str();
      app.add_flag("--ood", c.ood, "MQAR: evaluate with keys from {64..126} (Table 13)");
      app.add_option("--d-model", c.model.d_model, "model width")->capture_default_str();
      app.add_option("--heads", c.model.heads, "heads")->capture_default_str();
      app.add_option("--d-head", c.model.d_head, "head width (16, 32, 64)")->capture_default_str();
      app.add_option("--ffn", c.model.ffn, "FFN width")->capture_default_str();
      app.add_option("--layers", c.model.layers, "blocks")->capture_default_str();
      app.add_option("--lr", c.opt.lr, "peak learning rate")->capture_default_str();
      app.add_option("--out", a->out, "output folder (log.csv, summary.json)")->required();
      app.final_callback([a] {
        const auto r = vla::gpu::train::train_gpu(a->cfg, a->out, [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
        fmt::print("final loss {:.6f}, eval exact match {:.4f}, {:.3f} ms/step, {:.1f} s; wrote {}/log.csv, summary.json\n",
                   r.final_loss, r.eval_accuracy, r.step_ms, r.wall_s, a->out);
      });
    }};

}  // namespace
#endif
