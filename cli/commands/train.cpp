// `vla train`: train the small model of Tables 3/6 on copy or MQAR on the CPU (core/train/trainer.hpp).
// Writes DIR/summary.json, DIR/log.csv, DIR/checkpoint.bin; --resume DIR continues a run exactly.
// SIGINT stops after the current step with a resumable checkpoint and a consistent log.
#include "cli/command.hpp"
#include "core/train/trainer.hpp"

#include <fmt/format.h>

#include <csignal>
#include <cstdio>

namespace {

std::atomic<bool> g_interrupt{false};
extern "C" void on_sigint(int) { g_interrupt = true; }

struct Args {
  vla::train::TrainConfig cfg;
  std::string out;
  std::string resume;
  int threads = 0;
  int stop_after = -1;
};

const vla::cli::RegisterCommand reg{
    "train", "Train the small causal LM (Tables 3, 6) on copy or MQAR on the CPU",
    [](CLI::App& app) {
      auto a = std::make_shared<Args>();
      auto& c = a->cfg;
      c.steps = 2000;
      app.add_option("--task", c.task.task, "mqar | copy")->capture_default_str();
      app.add_option("--mixer", c.model.mixer.mixer, "vla, vla-v2, vla-rls, vla-fixed-a, vla-no-knorm, linear, deltanet, softmax")->capture_default_str();
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
      app.add_option("--d-head", c.model.d_head, "head width")->capture_default_str();
      app.add_option("--ffn", c.model.ffn, "FFN width")->capture_default_str();
      app.add_option("--layers", c.model.layers, "blocks")->capture_default_str();
      app.add_option("--lr", c.opt.lr, "peak learning rate")->capture_default_str();
      app.add_option("--checkpoint-every", c.checkpoint_every, "checkpoint every K steps")->capture_default_str();
      app.add_option("--threads", a->threads, "worker threads (0: all cores)")->capture_default_str();
      app.add_option("--stop-after", a->stop_after, "stop (resumably) after this many steps, as SIGINT would");
      app.add_option("--out", a->out, "output folder");
      app.add_option("--resume", a->resume, "continue the run in this folder");
      app.final_callback([a] {
        vla::train::RunOptions ro;
        ro.threads = a->threads;
        ro.stop_after = a->stop_after;
        ro.interrupt = &g_interrupt;
        const bool tty = isatty(fileno(stderr));
        ro.progress = [tty](const std::string& line) { std::fprintf(stderr, tty ? "\r%s   " : "%s\n", line.c_str()); };
        vla::train::TrainResult r;
        std::string dir = a->resume.empty() ? a->out : a->resume;
        std::signal(SIGINT, on_sigint);
        if (a->resume.empty()) {
          if (a->out.empty()) throw std::invalid_argument("--out: an output folder is required (or --resume DIR)");
          r = vla::train::train(a->cfg, a->out, ro);
        } else {
          r = vla::train::resume(a->resume, ro);
        }
        if (tty) std::fprintf(stderr, "\n");
        fmt::print("{} after {} steps: final loss {:.4f}, eval exact-match {:.4f}, wall {:.1f} s; wrote {}/summary.json, log.csv, checkpoint.bin\n",
                   r.interrupted ? "stopped (resume with --resume)" : "done", r.steps_done, r.final_loss, r.eval_accuracy, r.wall_s, dir);
      });
    }};

}  // namespace
