#pragma once
// What the training loop (core/train/trainer.cpp, `run`) needs from a device, and nothing more: one
// loop for every device ("one abstraction, many"), so the schedule, clip, evaluation, log, checkpoint,
// SIGINT stop and resume are written once. The CPU engine (cpu_engine.cpp) wraps batch_gradient and
// adamw_update; the GPU engine (gpu/train/trainer.cpp) wraps GpuModel. core/ stays free of CUDA: an
// engine is reached only through this interface and a factory (Device).
#include "core/model/params.hpp"
#include "core/train/adamw.hpp"
#include "core/train/tasks.hpp"

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace vla::train {

struct TrainConfig;
struct RunOptions;

struct BatchResult {
  double loss = 0.0;         // mean CE over the batch's targets
  double accuracy = 0.0;     // exact match per target position
  std::vector<double> S_fro, A_fro;  // (L) batch means of the per-sequence head mean of ||S_T||_F, ||A_T||_F
                                     // at the last token; NaN where the mixer has no S (softmax) or no A
  std::string nonfinite;     // first non-finite activation (sequence, block, tensor), empty if none
};

// The model's state on one device: parameters, AdamW moments and step count, and the last gradient.
class StepEngine {
 public:
  virtual ~StepEngine() = default;
  // Loss, accuracy and S/A norms of the batch; with gradient, also its mean gradient, kept inside the
  // engine for grad_norm and apply.
  virtual BatchResult forward(const Batch& b, bool gradient) = 0;
  // Global L2 norm of the kept gradient (in double). A non-finite entry sets *nonfinite_tensor to the
  // name of the first tensor holding one (or "gradient" where the engine cannot tell which).
  virtual double grad_norm(std::string* nonfinite_tensor) = 0;
  // One AdamW update (core/train/adamw.hpp) with the kept gradient times clip_scale (1: not clipped;
  // the engine rounds it to float once, as the CPU's g *= float(clip / norm)).
  virtual void apply(const AdamWConfig& c, double lr, double clip_scale) = 0;
  // Parameters and AdamW state (moments + step count) for the checkpoint, and back.
  virtual void export_state(model::Params<float>& p, AdamWState<float>& opt) const = 0;
  virtual void import_state(const model::Params<float>& p, const AdamWState<float>& opt) = 0;
};

// A device the loop can train on: its name (recorded in checkpoint.bin and summary.json, "cpu" or
// "cuda") and a factory. make() validates everything device-specific (and throws naming the parameter)
// before the loop writes anything; it returns an engine holding init_params(cfg.model, cfg.seed) and
// zero moments (the loop imports a checkpoint's state into it on resume).
struct Device {
  using Job = std::function<void(std::size_t run, const Device& on)>;
  std::string name = "cpu";
  std::function<std::unique_ptr<StepEngine>(const TrainConfig&, const RunOptions&)> make;
  // What make() checks of a config beyond TrainConfig::validate, without making an engine (throws
  // naming the parameter); empty: nothing. Many runs are all checked before the first starts.
  std::function<void(const TrainConfig&)> check;
  // Runs n independent runs, job(i, device of this kind); empty: one after another on this device (the
  // CPU engine already uses every core). The GPU runs them concurrently, one stream each.
  std::function<void(std::size_t n, const Job& job)> run_many;
};

}  // namespace vla::train
