#pragma once
// The training loop: float32 model, AdamW, warm-up + cosine schedule, global-norm clipping,
// checkpoints, CSV log, JSON summary, SIGINT stop, resume. One loop for every device: it drives a
// StepEngine (core/train/step_engine.hpp); the CPU engine (core/train/cpu_engine.hpp, data-parallel over
// the batch) is the default, the GPU engine is gpu/train/trainer.hpp's cuda_device().
// The run's files: checkpoint.bin (core/train/checkpoint.hpp), log.csv, summary.json.
#include "core/train/cpu_engine.hpp"
#include "core/train/step_engine.hpp"
#include "core/train/train_config.hpp"

#include <atomic>
#include <filesystem>
#include <functional>
#include <vector>

namespace vla::train {

struct RunOptions {
  int threads = 0;                          // 0: std::thread::hardware_concurrency()
  int stop_after = -1;                      // stop (as if interrupted) after this many steps; -1 never
  const std::atomic<bool>* interrupt = nullptr;  // set by SIGINT: checkpoint and stop
  std::function<void(const std::string&)> progress;  // progress line, or empty
  int progress_every = 1;                   // a progress line every K steps (and at the last step); 0: every
                                            // ~10% of the run's steps, max(1, steps / 10), also on resume
  std::string recurrent_form = "auto";      // one GPU only: which kernels run VLA's recurrence (auto, fused,
                                            // chunked: gpu/train/model.hpp); the same function either way
};

struct TrainResult {
  int steps_done = 0;
  int steps_run = 0;           // steps done by this call (steps_done minus the step a resume started at)
  bool interrupted = false;
  double final_loss = 0.0;
  double eval_accuracy = 0.0;
  double wall_s = 0.0;
  double step_ms = 0.0;        // mean wall time of this process's steps (batch, gradient, update; not evaluation)
  std::vector<double> losses;  // every step's loss, from step 1 (the log's loss column)
  std::vector<std::vector<double>> log;  // log.csv's rows, from step 1
  model::Params<float> params;
};

// Runs (or, with resume, continues) the training in out_dir: checkpoint.bin, log.csv, summary.json.
// out_dir empty: nothing is written (no checkpoint, so such a run cannot be resumed).
// Every bad configuration (and, through device.make, every device-specific one) is rejected before
// anything is written.
TrainResult train(const TrainConfig& cfg, const std::filesystem::path& out_dir, const RunOptions& ro,
                  const Device& device = cpu_device());
// Continues the run in out_dir on `device`, which must be the device the run was trained on (the
// checkpoint records it): otherwise std::invalid_argument naming --device. Why refuse rather than
// continue: the devices sum in different orders, so the continued run would not be the run the
// checkpoint came from (resume's promise is the uninterrupted run, bit for bit).
TrainResult resume(const std::filesystem::path& out_dir, const RunOptions& ro, const Device& device = cpu_device());
// Several independent runs on one device, cfgs[i] into dirs[i] (each as train(); an empty dir: written
// nowhere). Every config, also the device's checks, is validated before the first run starts; then
// device.run_many runs them (the CPU one after another, the GPU concurrently). ro applies to each run:
// stop_after and interrupt stop them all, resumably; ro.progress gets every run's lines, prefixed with its
// folder's name (or "run i"), one line at a time.
std::vector<TrainResult> train_many(const std::vector<TrainConfig>& cfgs, const std::vector<std::filesystem::path>& dirs,
                                    const RunOptions& ro, const Device& device = cpu_device());
// Continues the runs in dirs (each as resume()), once every checkpoint is found to be a run of `device`.
std::vector<TrainResult> resume_many(const std::vector<std::filesystem::path>& dirs, const RunOptions& ro,
                                     const Device& device = cpu_device());
// The device a checkpoint was trained on: "cpu" when it has no "device" key (CPU runs write none).
// Throws std::invalid_argument naming --resume if out_dir holds no checkpoint.
std::string checkpoint_device(const std::filesystem::path& out_dir);

}  // namespace vla::train
