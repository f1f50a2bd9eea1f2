// `vla train`: train the small model of Tables 3/6 on copy or MQAR (core/train/trainer.hpp) on the CPU
// or, with --device cuda, on the GPU (gpu/train/trainer.hpp; the same loop, log and checkpoint).
// Writes DIR/summary.json, DIR/log.csv, DIR/checkpoint.bin; --resume DIR continues a run exactly, on the
// device it was trained on (recorded in the checkpoint). SIGINT stops after the current step with a
// resumable checkpoint and a consistent log.
#include "cli/command.hpp"
#include "cli/train_options.hpp"
#include "core/train/trainer.hpp"
#ifdef VLA_HAVE_CUDA
#include "gpu/train/trainer.hpp"
#endif

#include <fmt/format.h>

#include <cstdio>

namespace {

struct Args {
  vla::train::TrainConfig cfg;
  std::string out;
  std::string resume;
  int threads = 0;
  int stop_after = -1;
  std::string device = "cpu";
};

vla::train::Device device_named(const std::string& name) {
  if (name == "cpu") return vla::train::cpu_device();
  if (name != "cuda") throw std::invalid_argument(fmt::format("--device: '{}' (allowed: cpu, cuda)", name));
#ifdef VLA_HAVE_CUDA
  return vla::gpu::train::cuda_device();
#else
  throw std::invalid_argument("--device: cuda is not available, this build has no CUDA path (nvcc was not found)");
#endif
}

const vla::cli::RegisterCommand reg{
    "train", "Train the small causal LM (Tables 3, 6) on copy or MQAR, on the CPU or (--device cuda) the GPU",
    [](CLI::App& app) {
      auto a = std::make_shared<Args>();
      auto& c = a->cfg;
      vla::cli::add_training_options(app, c, "vla, vla-v2, vla-rls, vla-fixed-a, vla-no-knorm, linear, deltanet, softmax", "head width");
      vla::cli::add_run_control_options(app, c, a->stop_after);
      app.add_option("--threads", a->threads, "worker threads (0: all cores)")->capture_default_str();
      app.add_option("--out", a->out, "output folder");
      app.add_option("--resume", a->resume, "continue the run in this folder (on the device it was trained on)");
      auto* dev = app.add_option("--device", a->device, "cpu | cuda (cuda: fp32 on the GPU, vla/linear/deltanet/softmax; "
                                                         "`vla train-gpu` runs many seeds and mixers at once). With --resume: "
                                                         "default the run's device; another one is refused")->capture_default_str();
      app.final_callback([a, dev] {
        // A resumed run continues on the device its checkpoint records unless --device says otherwise
        // (then vla::train::resume refuses, naming --device).
        if (!a->resume.empty() && dev->count() == 0) a->device = vla::train::checkpoint_device(a->resume);
        const vla::train::Device device = device_named(a->device);
        vla::train::RunOptions ro;
        ro.threads = a->threads;
        ro.stop_after = a->stop_after;
        const bool tty = isatty(fileno(stderr));
        ro.progress = [tty](const std::string& line) { std::fprintf(stderr, tty ? "\r%s   " : "%s\n", line.c_str()); };
        if (device.name != "cpu") ro.progress_every = 100;  // a GPU step takes milliseconds
        vla::train::TrainResult r;
        std::string dir = a->resume.empty() ? a->out : a->resume;
        ro.interrupt = vla::cli::stop_on_sigint();
        if (a->resume.empty()) {
          if (a->out.empty()) throw std::invalid_argument("--out: an output folder is required (or --resume DIR)");
          r = vla::train::train(a->cfg, a->out, ro, device);
        } else {
          r = vla::train::resume(a->resume, ro, device);
        }
        if (tty) std::fprintf(stderr, "\n");
        fmt::print("{} after {} steps on {}: final loss {:.4f}, eval exact-match {:.4f}, {:.3f} ms/step, wall {:.1f} s; wrote "
                   "{}/summary.json, log.csv, checkpoint.bin\n",
                   r.interrupted ? "stopped (resume with --resume)" : "done", r.steps_done, device.name, r.final_loss,
                   r.eval_accuracy, r.step_ms, r.wall_s, dir);
      });
    }};

}  // namespace
