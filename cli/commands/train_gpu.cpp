// `vla train-gpu`: the small model of `vla train` trained on the GPU (gpu/train/trainer.hpp): the same
// loop as `vla train --device cuda` (tasks, batches, AdamW, schedule, clip, log, checkpoint.bin); fp32;
// mixers vla, linear, deltanet, softmax; many seeds x mixers at once on one GPU. SIGINT and --stop-after
// stop every run resumably; --resume continues them. Compiled only with the CUDA path (VLA_HAVE_CUDA);
// without it the command does not exist.
#ifdef VLA_HAVE_CUDA
#include "cli/command.hpp"
#include "cli/train_options.hpp"
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
  int stop_after = -1;
  bool resume = false;
};

const vla::cli::RegisterCommand reg{
    "train-gpu", "Train the small causal LM (Tables 3, 6) on copy or MQAR on the GPU (fp32; vla, linear, deltanet, softmax)",
    [](CLI::App& app) {
      auto a = std::make_shared<Args>();
      auto& c = a->cfg;
      vla::cli::add_training_options(app, c, "vla, linear, deltanet, softmax", "head width (16, 32, 64; softmax also 128)");
      vla::cli::add_run_control_options(app, c, a->stop_after);
      app.add_option("--seeds", a->seeds, "several runs: these seeds (x --mixers), concurrently on one GPU, in OUT/<mixer>_seed<S>")->delimiter(',');
      app.add_option("--mixers", a->mixers, "several runs: these mixers (x --seeds)")->delimiter(',');
      app.add_option("--out", a->out, "output folder (log.csv, summary.json, checkpoint.bin)")->required();
      app.add_flag("--resume", a->resume, "continue the run(s) in --out (with the same --seeds/--mixers; the other options "
                                          "come from the checkpoints)");
      app.final_callback([a] {
        vla::train::RunOptions ro;
        ro.stop_after = a->stop_after;
        ro.interrupt = vla::cli::stop_on_sigint();
        auto progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
        auto stopped = [](const vla::train::TrainResult& r) { return r.interrupted ? " (stopped: resume with --resume)" : ""; };
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
          const auto rs = a->resume ? vla::gpu::train::resume_gpu_many(dirs, progress, ro)
                                    : vla::gpu::train::train_gpu_many(cfgs, dirs, progress, ro);
          const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          long run_steps = 0;
          for (std::size_t i = 0; i < rs.size(); ++i) {
            fmt::print("{}: final loss {:.6f}, eval exact match {:.4f}, {:.3f} ms/step{}\n", dirs[i].string(), rs[i].final_loss,
                       rs[i].eval_accuracy, rs[i].step_ms, stopped(rs[i]));
            run_steps += rs[i].steps_run;
          }
          fmt::print("{} runs, {} run-steps run concurrently in {:.1f} s ({:.3f} ms per run-step)\n", rs.size(), run_steps, wall,
                     1e3 * wall / double(std::max(1L, run_steps)));
          return;
        }
        ro.progress = progress;
        ro.progress_every = 0;  // every ~10% of the steps
        const auto r = a->resume ? vla::gpu::train::resume_gpu(a->out, ro) : vla::gpu::train::train_gpu(a->cfg, a->out, ro);
        fmt::print("final loss {:.6f}, eval exact match {:.4f}, {:.3f} ms/step, {:.1f} s{}; wrote {}/log.csv, summary.json, checkpoint.bin\n",
                   r.final_loss, r.eval_accuracy, r.step_ms, r.wall_s, stopped(r), a->out);
      });
    }};

}  // namespace
#endif
