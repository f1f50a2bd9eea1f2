// `vla train`: train the small model of Tables 3/6 on copy or MQAR (core/train/trainer.hpp) on the CPU
// or, with --device cuda, on the GPU (gpu/train/trainer.hpp; the same loop, log and checkpoint).
// One run writes OUT/summary.json, log.csv, checkpoint.bin. --seeds and --mixers make several runs, every
// mixer with every seed, each in OUT/<mixer>_seed<S>/: on the CPU one after another, on the GPU
// concurrently (one CUDA stream each). --resume DIR continues the run in DIR, or the runs in its
// subfolders, exactly, on the device they were trained on (recorded in each checkpoint). SIGINT stops
// every run after its current step with a resumable checkpoint and a consistent log.
// `mpirun -np N vla train --data-parallel ...` spreads each batch over N CPU processes
// (core/train/data_parallel.hpp): rank 0 runs the loop and writes the files, the others compute shards;
// the result is the one-process run, bit for bit. `--device cuda:N` trains each run data-parallel over N
// GPUs of this host (gpu/train/data_parallel.hpp).
#include "cli/command.hpp"
#include "cli/list_option.hpp"
#include "cli/train_options.hpp"
#include "cli/training_device.hpp"
#include "core/parallel/group.hpp"
#include "core/train/data_parallel.hpp"
#include "core/train/trainer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>

namespace {

namespace fs = std::filesystem;

struct Args {
  vla::train::TrainConfig cfg;
  std::string out;
  std::string resume;
  int threads = 0;
  int stop_after = -1;
  std::string device = "cpu";
  std::string form = "auto";         // --recurrent-form: --device cuda only (gpu/train/model.hpp)
  std::vector<std::uint64_t> seeds;  // several runs: --mixers x --seeds
  std::vector<std::string> mixers;
  bool data_parallel = false;
};

// The runs of --mixers x --seeds (either defaulting to --mixer, --seed) and their folders OUT/<mixer>_seed<S>.
void plan_runs(const Args& a, const fs::path& out, std::vector<vla::train::TrainConfig>& cfgs, std::vector<fs::path>& dirs) {
  const auto mixers = a.mixers.empty() ? std::vector<std::string>{a.cfg.model.mixer.mixer} : a.mixers;
  const auto seeds = a.seeds.empty() ? std::vector<std::uint64_t>{a.cfg.seed} : a.seeds;
  for (const auto& m : mixers)
    for (auto s : seeds) {
      auto c = a.cfg;
      c.model.mixer.mixer = m;
      c.seed = s;
      cfgs.push_back(c);
      dirs.push_back(out / fmt::format("{}_seed{}", m, s));
    }
}

// The folders --resume DIR continues: those of --seeds/--mixers if given; else DIR if it holds a
// checkpoint; else every subfolder of DIR that holds one (the runs of --seeds/--mixers), in name order.
std::vector<fs::path> runs_to_resume(const Args& a, bool many) {
  const fs::path dir = a.resume;
  std::vector<vla::train::TrainConfig> cfgs;
  std::vector<fs::path> dirs;
  if (many) {
    plan_runs(a, dir, cfgs, dirs);
    return dirs;
  }
  if (fs::exists(dir / "checkpoint.bin")) return {dir};
  std::error_code ec;
  if (fs::is_directory(dir, ec))
    for (const auto& e : fs::directory_iterator(dir))
      if (fs::exists(e.path() / "checkpoint.bin")) dirs.push_back(e.path());
  if (dirs.empty())
    throw std::invalid_argument(fmt::format("--resume: no checkpoint at '{}', nor in a subfolder of '{}' (the runs of --seeds, --mixers)",
                                            (dir / "checkpoint.bin").string(), dir.string()));
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

std::string stopped(const vla::train::TrainResult& r) { return r.interrupted ? " (stopped: resume with --resume)" : ""; }

const vla::cli::RegisterCommand reg{
    "train", "Train the small causal LM (Tables 3, 6) on copy or MQAR, on the CPU or (--device cuda) the GPU",
    [](CLI::App& app) {
      auto a = std::make_shared<Args>();
      vla::cli::add_training_options(app, a->cfg);
      vla::cli::add_run_control_options(app, a->cfg, a->stop_after);
      vla::cli::add_list_option(app, "--seeds", a->seeds, "several runs: these seeds (x --mixers), each in OUT/<mixer>_seed<S>")
          ->excludes("--seed");
      vla::cli::add_list_option(app, "--mixers", a->mixers, "several runs: these mixers (x --seeds)", vla::kMixerNames)
          ->excludes("--mixer");
      app.add_option("--threads", a->threads, "CPU worker threads (0: all cores)")->capture_default_str();
      app.add_option("--out", a->out, "output folder");
      app.add_option("--resume", a->resume, "continue the run in this folder, or the runs in its subfolders (the other "
                                            "options come from the checkpoints)");
      auto* dev = app.add_option("--device", a->device, "cpu | cuda | cuda:N (cuda: fp32 on the GPU, several runs concurrently, "
                                                         "spread over the visible GPUs; cuda:N: each run data-parallel over GPUs 0..N-1, "
                                                         "NCCL). With --resume: default the runs' device; another one is refused")
                      ->capture_default_str();
      app.add_option("--recurrent-form", a->form,
                     "auto | fused | chunked: the kernels of VLA's recurrence on one GPU (chunked: the `vla` preset at "
                     "d_head 32; auto takes it where it measured faster, few sequences of many tokens: gpu/train/model.hpp)")
          ->capture_default_str();
      app.add_flag("--data-parallel", a->data_parallel,
                   "under mpirun: each batch's shards over the ranks (CPU), the one-process run bit for bit; rank 0 writes");
      app.final_callback([a, dev] {
        auto& ranks = vla::parallel::world();
        if (!a->data_parallel) vla::parallel::require_one_process("vla train without --data-parallel");
        if (a->data_parallel && a->device != "cpu")
          throw std::invalid_argument(fmt::format("--data-parallel: CPU ranks only, got --device {} (allowed: cpu)", a->device));
        if (a->data_parallel && !ranks.root()) {
          std::signal(SIGINT, SIG_IGN);  // the root stops the run (after its step, with a checkpoint); serve until it says so
          vla::train::serve_data_parallel(ranks, a->threads);
          return;
        }
        // The workers serve until the root is done, also when this rank fails.
        struct Finish {
          vla::parallel::Group& g;
          bool on;
          ~Finish() { if (on) vla::train::finish_data_parallel(g); }
        } finish{ranks, a->data_parallel};
        const bool many = !a->seeds.empty() || !a->mixers.empty();
        std::vector<vla::train::TrainConfig> cfgs;
        std::vector<fs::path> dirs;
        if (a->resume.empty()) {
          if (a->out.empty()) throw std::invalid_argument("--out: an output folder is required (or --resume DIR)");
          plan_runs(*a, a->out, cfgs, dirs);
        } else {
          dirs = runs_to_resume(*a, many);
          // Runs continue on the device their checkpoints record unless --device says otherwise (then
          // vla::train::resume refuses, naming --device).
          if (dev->count() == 0) a->device = vla::train::checkpoint_device(dirs.front());
        }
        const vla::train::Device device =
            a->data_parallel ? vla::train::data_parallel_device(ranks) : vla::cli::training_device(a->device);
        if (a->form != "auto" && a->device != "cuda")
          throw std::invalid_argument(fmt::format("--recurrent-form: '{}' picks the kernels of one GPU; it needs --device cuda (got {})",
                                                  a->form, a->device));
        vla::train::RunOptions ro;
        ro.threads = a->threads;
        ro.stop_after = a->stop_after;
        ro.recurrent_form = a->form;
        ro.interrupt = vla::cli::stop_on_sigint();

        if (!many && (a->resume.empty() || dirs.front() == fs::path(a->resume))) {  // one run, in OUT itself
          const bool tty = isatty(fileno(stderr));
          ro.progress = [tty](const std::string& line) { std::fprintf(stderr, tty ? "\r%s   " : "%s\n", line.c_str()); };
          if (device.name != "cpu") ro.progress_every = 100;  // a GPU step takes milliseconds
          const fs::path dir = a->resume.empty() ? fs::path(a->out) : dirs.front();
          const auto r = a->resume.empty() ? vla::train::train(a->cfg, dir, ro, device) : vla::train::resume(dir, ro, device);
          if (tty) std::fprintf(stderr, "\n");
          fmt::print("{} after {} steps on {}: final loss {:.4f}, eval exact-match {:.4f}, {:.3f} ms/step, wall {:.1f} s; wrote "
                     "{}/summary.json, log.csv, checkpoint.bin\n",
                     r.interrupted ? "stopped (resume with --resume)" : "done", r.steps_done, device.name, r.final_loss,
                     r.eval_accuracy, r.step_ms, r.wall_s, dir.string());
          return;
        }

        ro.progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
        ro.progress_every = 0;  // every ~10% of each run's steps
        const auto t0 = std::chrono::steady_clock::now();
        const auto rs = a->resume.empty() ? vla::train::train_many(cfgs, dirs, ro, device) : vla::train::resume_many(dirs, ro, device);
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        long run_steps = 0;
        for (std::size_t i = 0; i < rs.size(); ++i) {
          fmt::print("{}: final loss {:.6f}, eval exact match {:.4f}, {:.3f} ms/step{}\n", dirs[i].string(), rs[i].final_loss,
                     rs[i].eval_accuracy, rs[i].step_ms, stopped(rs[i]));
          run_steps += rs[i].steps_run;
        }
        fmt::print("{} runs, {} run-steps run {} on {} in {:.1f} s ({:.3f} ms per run-step)\n", rs.size(), run_steps,
                   device.run_many ? "concurrently" : "one after another", device.name, wall,
                   1e3 * wall / double(std::max(1L, run_steps)));
      });
    },
    true};  // splits over ranks with --data-parallel; refuses several ranks without it

}  // namespace
