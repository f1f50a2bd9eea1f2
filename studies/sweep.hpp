#pragma once
// The sweep: brings a list of training runs to completion through the run store. Each distinct config
// (RunStore::key) is one run in its own store folder:
//   summary.json says complete        -> reused, nothing is trained;
//   diverged.json (a non-finite loss) -> reused: the divergence is the run's result;
//   checkpoint.bin without a complete summary (an interrupted run) -> continued (vla::train::resume_many);
//   otherwise                         -> trained (vla::train::train_many).
// Runs go to `device`; a run the device refuses (its check throws, e.g. the GPU's head widths) goes to
// `fallback` (the CPU), in a pool of its own that runs beside the device's. On the GPU `concurrent` runs
// train at once in this process (each worker hands train_many one run: one host thread and stream each);
// on the CPU one after another, each on every thread. Longest runs start first. Progress with an ETA
// goes to `progress`; setting *interrupt (SIGINT) stops every run after its current step with a
// resumable checkpoint, and no new run starts: running the same sweep again redoes nothing finished.
// With `ranks` of more than one process the runs are split over them (studies/sweep_ranks.hpp).
#include "core/parallel/group.hpp"
#include "core/train/trainer.hpp"
#include "studies/run_store.hpp"
#include "studies/study.hpp"

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace vla::studies {

struct SweepOptions {
  train::Device device = train::cpu_device();
  train::Device fallback = train::cpu_device();
  bool use_fallback = true;      // false: runs the device refuses are Skipped (reported as not run), not trained elsewhere
  bool train = true;             // false: nothing is trained; a run the store does not hold finished is an error (reading a store back)
  int concurrent = 1;            // runs at once on `device` when it runs many at once (the GPU)
  int threads = 0;               // threads of each CPU run (0: all cores)
  int fallback_concurrent = 1;   // runs at once on `fallback` (the CPU runs beside the GPU's), `threads` each
  const std::atomic<bool>* interrupt = nullptr;
  std::function<void(const std::string&)> progress;  // status lines (one at a time); empty: silent
  double status_every_s = 15;    // a status line with the ETA at most this often (and one per finished run)
  // Called for every run whose outcome is final (Complete or Diverged), with how it got there: "reused"
  // (found in the store), "trained" or "resumed"; from the sweep's threads, one call at a time.
  std::function<void(const RunOutcome&, const std::string& how)> finished;
  parallel::Group* ranks = nullptr;  // several processes: the root splits the runs over them (studies/sweep_ranks.hpp)
};

struct SweepResult {
  std::map<std::string, RunOutcome> outcomes;  // by RunStore::key
  int reused = 0, resumed = 0, trained = 0, diverged = 0, skipped = 0;
  bool interrupted = false;
  double wall_s = 0;
};

SweepResult sweep(const std::vector<train::TrainConfig>& runs, const RunStore& store, const SweepOptions& o);

// Where the sweep trains a run: `device`, or `fallback` when the device refuses it (its check throws
// std::invalid_argument) and use_fallback is on; nullptr when it is skipped.
const train::Device* device_for(const train::TrainConfig& c, const SweepOptions& o);

// A run's rough cost (steps x batch x tokens, heavier with wider heads), for the ETA and the order.
double run_cost(const train::TrainConfig& c);

// A rough wall-time model of one run in a concurrent sweep, for planning (`vla study plan`), in seconds.
// cuda: ms per run-step of 16 concurrent runs of the default model at batch 64 mixing the four mixers, linear
// in T (0.0636 + 0.00792 T: fitted to such sweeps' whole walls on one H100, studies/plan-rates.sh, docs/studies.md),
// linear in batch, wider heads ~linearly, plus 5% for evaluation; cpu: per token of the batch, measured on the
// 2-core dev VM (0.34 s per step at n = 24, batch 64, 2 threads: 73 us per token), divided by threads / 2,
// heavier with wider heads.
double estimated_seconds(const train::TrainConfig& c, const std::string& device, int cpu_threads = 2);

// Floating-point operations of a run's dense projections, forward and backward: 6 per multiply-add of
// core/model/params.hpp's dense_macs_per_token, per token of every step's batch. `vla study plan` divides them
// by two fp32 GEMM rates of one H100 80GB HBM3, in TFLOPS: cuBLAS SGEMM's best at the training step's shapes
// (gpu/dev/gemm_probe.py, 2026-11-27: 35-45 at 99328 rows, 23-36 at 25600, 3.3-8.2 at one run's 1600 rows)
// and the card's fp32 peak (132 SMs x 128 lanes x 2 flops x 1.98 GHz): a floor on a sweep's time while the
// GEMMs stay fp32.
double dense_flops(const train::TrainConfig& c);
inline constexpr double kH100SgemmTflops = 45, kH100Fp32PeakTflops = 67;

// A run the sweep does not train (device_for gives nullptr), as reported.
RunOutcome skipped_outcome(const train::TrainConfig& c, const SweepOptions& o);

// The outcome recorded in a run folder (summary.json, diverged.json), or Interrupted if it has neither.
RunOutcome read_outcome(const train::TrainConfig& c, const std::filesystem::path& dir);

}  // namespace vla::studies
