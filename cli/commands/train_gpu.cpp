// `vla train-gpu`: the small model of `vla train` trained on the GPU (gpu/train/trainer.hpp): same
// tasks, batches, AdamW, schedule and clip; fp32; mixers vla, linear, deltanet, softmax. Compiled only with
// the CUDA path (VLA_HAVE_CUDA); without it the command does not exist.
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
};

const vla::cli::RegisterCommand reg{
    "train-gpu", "Train the small causal LM (Tables 3, 6) on copy or MQAR on the GPU (fp32; vla, linear, deltanet, softmax)",
    [](CLI::App& app) {
      auto a = std::make_shared<Args>();
      auto& c = a->cfg;
      vla::cli::add_training_options(app, c, "vla, linear, deltanet, softmax", "head width (16, 32, 64; softmax also 128)");
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
