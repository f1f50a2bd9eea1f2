// `vla train-gpu`: the small model of `vla train` trained on the GPU (gpu/train/trainer.hpp): same
// tasks, batches, AdamW, schedule and clip; fp32; mixers vla, linear, deltanet. Compiled only with
// the CUDA path (VLA_HAVE_CUDA); without it the command does not exist.
#ifdef VLA_HAVE_CUDA
#include "cli/command.hpp"
#include "gpu/train/trainer.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

namespace {

struct Args {
  vla::train::TrainConfig cfg;
  std::string out;
  std::vector<std::uint64_t> seeds;   // --seeds: several runs (x --mixers), concurrently on one GPU
  std::vector<std::string> mixers;
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
      app.add_option("--seeds", a->seeds, "several runs: these seeds (x --mixers), concurrently on one GPU, in OUT/<mixer>_seed<S>")->delimiter(',');
      app.add_option("--mixers", a->mixers, "several runs: these mixers (x --seeds)")->delimiter(',');
      app.add_option("--out", a->out, "output folder (log.csv, summary.json)")->required();
      app.final_callback([a] {
        if (!a->seeds.empty() || !a->mixers.empty()) {
          if (a->seeds.empty()) a->seeds.push_back(a->cfg.seed);
          if (a->mixers.empty()) a->mixers.push_back(a->cfg.model.mixer.mixer);
          std::vector<vla::train::TrainConfig> cfgs;
          std::vector<std::filesystem::path> dirs;
          for (const auto& m : a->mixers)
            for (auto s : a->seeds) {
              auto c = a->cfg;
              c.model.mixer.mixer = m;
              c.seed = s;
              cfgs.push_back(c);
              dirs.push_back(std::filesystem::path(a->out) / fmt::format("{}_seed{}", m, s));
            }
          const auto t0 = std::chrono::steady_clock::now();
          const auto rs = vla::gpu::train::train_gpu_many(cfgs, dirs, [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
          const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          for (std::size_t i = 0; i < rs.size(); ++i)
            fmt::print("{}: final loss {:.6f}, eval exact match {:.4f}, {:.3f} ms/step\n", dirs[i].string(), rs[i].final_loss,
                       rs[i].eval_accuracy, rs[i].step_ms);
          fmt::print("{} runs of {} steps concurrently in {:.1f} s ({:.3f} ms per run-step)\n", rs.size(), a->cfg.steps, wall,
                     1e3 * wall / (double(rs.size()) * a->cfg.steps));
          return;
        }
        const auto r = vla::gpu::train::train_gpu(a->cfg, a->out, [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
        fmt::print("final loss {:.6f}, eval exact match {:.4f}, {:.3f} ms/step, {:.1f} s; wrote {}/log.csv, summary.json\n",
                   r.final_loss, r.eval_accuracy, r.step_ms, r.wall_s, a->out);
      });
    }};

}  // namespace
#endif
