// `vla bench data-parallel`: one training step of one model on 1 GPU (GpuModel) and data-parallel over
// N GPUs (DataParallelModel, gpu/train/data_parallel.hpp), at a wide model by default (d_model 512,
// 8 layers of 8 heads of d_h 64, FFN 2048, MQAR at T = 4096), in one run: median wall time of a step
// (forward, backward, all-reduce, AdamW; the GPUs waited for), tokens per second, the speedup over one
// GPU at the same batch and its efficiency (speedup / N), and the all-reduce's share: its time and the
// bus bandwidth it reached (2 (N - 1) / N times the gradient's bytes per second, NCCL's busbw).
#include "cli/list_option.hpp"
#include "cli/median_time.hpp"
#include "core/io/csv.hpp"
#include "core/model/config.hpp"
#include "core/rules/gpu_support.hpp"
#include "core/train/tasks.hpp"
#ifdef VLA_HAVE_NCCL
#include "gpu/cuda_check.hpp"
#include "gpu/device_query.hpp"
#include "gpu/train/data_parallel.hpp"
#include "gpu/train/model.hpp"
#endif

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace vla::cli {
namespace {

struct DataParallelBenchArgs {
  model::ModelConfig model = [] {
    model::ModelConfig c;
    c.d_model = 512; c.layers = 8; c.heads = 8; c.d_head = 64; c.ffn = 2048;
    c.mixer.mixer = "vla";
    return c;
  }();
  int seq_len = 4096, pairs = 8, reps = 3;
  std::vector<int> batches{16, 32};
  std::vector<int> gpus{1, 2};
  std::string csv;
};

#ifdef VLA_HAVE_NCCL
// Median wall time of a training step in ms (median_time.hpp); each step ends with the GPUs waited for.
template <class Model> double step_ms(Model& m, const train::Batch& b, int reps) {
  const train::AdamWConfig opt;
  return 1e3 * median_seconds(reps, [&] {
    m.forward_backward(b, true);
    m.adamw_step(opt, 1e-4, 1.0);
    m.synchronize();
  });
}
#endif

void run(const DataParallelBenchArgs& a) {
  a.model.validate();  // names the flag of a bad width or mixer; the GPU's own limits: GpuModel's constructor
  if (a.reps < 1) throw std::invalid_argument(fmt::format("--reps: {} (allowed: >= 1)", a.reps));
  for (int g : a.gpus)
    if (g < 1) throw std::invalid_argument(fmt::format("--gpus: {} (allowed: >= 1)", g));
  train::TaskConfig task;
  task.task = "mqar";
  task.pairs = a.pairs;
  task.seq_len = a.seq_len;
  task.validate();
  model::ModelConfig mc = a.model;
  mc.max_len = std::max(mc.max_len, task.length());  // a positional row for every token
  for (int b : a.batches)
    for (int g : a.gpus)
      if (b < g) throw std::invalid_argument(fmt::format("--batches: {} sequences cannot be split over {} GPUs", b, g));
#ifdef VLA_HAVE_NCCL
  const int visible = gpu::device_count();
  for (int g : a.gpus)
    if (g > visible) throw std::invalid_argument(fmt::format("--gpus: {} asked for, {} visible", g, visible));
  fmt::print("{}", gpu::describe_devices());
  const auto p = model::init_params<float>(mc, 1);
  std::size_t n_params = 0;
  for (const auto& t : p.t) n_params += std::size_t(t.size());
  const double grad_mb = 4.0 * double(n_params) / 1e6;
  fmt::print("model: {} d_model {} layers {} heads {} d_h {} FFN {} ({} parameters, fp32 gradient {:.1f} MB); MQAR n = {}, T = {}; "
             "median of {} steps after 1 warm-up\n",
             mc.mixer.mixer, mc.d_model, mc.layers, mc.heads, mc.d_head, mc.ffn, n_params, grad_mb, a.pairs,
             a.seq_len, a.reps);
  fmt::print("{:>6} {:>5} {:>11} {:>12} {:>8} {:>10} {:>13} {:>14}\n", "batch", "gpus", "ms/step", "tokens/s", "speedup", "efficiency",
             "allreduce ms", "busbw GB/s");
  io::CsvTable table({"batch", "gpus", "step_ms", "tokens_per_s", "speedup", "efficiency", "allreduce_ms", "busbw_GBps", "gradient_MB"});
  for (int B : a.batches) {
    const train::Batch b = train::make_batch(task, B, train::batch_seed(7, 0));
    double one = 0;
    for (int g : a.gpus) {
      double ms = 0, ar = 0;
      if (g == 1) {
        cudaStream_t s = nullptr;
        gpu::check(cudaSetDevice(0), "cudaSetDevice");
        gpu::check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
        {
          gpu::train::GpuModel m(mc, p, s);
          ms = step_ms(m, b, a.reps);
        }
        cudaStreamDestroy(s);
      } else {
        gpu::train::DataParallelModel m(mc, p, g);
        ms = step_ms(m, b, a.reps);
        ar = m.last_all_reduce_ms();
      }
      if (g == 1) one = ms;
      const double speedup = one > 0 ? one / ms : std::nan(""), tok = double(B) * a.seq_len / (ms / 1e3);
      const double busbw = g > 1 ? 2.0 * (g - 1) / g * grad_mb / 1e3 / (ar / 1e3) : std::nan("");
      fmt::print("{:>6} {:>5} {:>11.2f} {:>12.4g} {:>8.3f} {:>10.3f} {:>13.3f} {:>14.1f}\n", B, g, ms, tok, speedup, speedup / g, ar, busbw);
      table.add_row({double(B), double(g), ms, tok, speedup, speedup / g, ar, busbw, grad_mb});
    }
  }
  fmt::print("speedup: the 1-GPU step's time / this one's at the same batch (NaN where 1 GPU was not measured); allreduce: the "
             "last timed step's, host wall time around the grouped ncclAllReduce and the wait for it\n");
  if (!a.csv.empty()) table.write(a.csv);
#else
  throw std::invalid_argument("vla bench data-parallel: this build has no NCCL (or no CUDA): data parallel over GPUs needs both");
#endif
}

}  // namespace

void add_bench_data_parallel(CLI::App& bench) {
  auto a = std::make_shared<DataParallelBenchArgs>();
  auto* sc = bench.add_subcommand("data-parallel", "one training step on 1 GPU and data-parallel over N GPUs (NCCL): time, "
                                                   "speedup, all-reduce bandwidth");
  sc->add_option("--mixer", a->model.mixer.mixer, fmt::format("mixer (one with a GPU path: {})", vla::gpu_mixer_names(vla::GpuUse::Training)))->capture_default_str();
  sc->add_option("--d-model", a->model.d_model, "model width")->capture_default_str();
  sc->add_option("--layers", a->model.layers, "blocks")->capture_default_str();
  sc->add_option("--heads", a->model.heads, "heads")->capture_default_str();
  sc->add_option("--d-head", a->model.d_head, "head width")->capture_default_str();
  sc->add_option("--ffn", a->model.ffn, "FFN width")->capture_default_str();
  sc->add_option("--seq-len", a->seq_len, "MQAR sequence length T")->capture_default_str();
  sc->add_option("--pairs", a->pairs, "MQAR key-value pairs n")->capture_default_str();
  add_list_option(*sc, "--batches", a->batches, "sequences per step, comma separated");
  add_list_option(*sc, "--gpus", a->gpus, "GPU counts, comma separated (1: GpuModel alone, the speedup's baseline)");
  sc->add_option("--reps", a->reps, "timed steps per point (median reported)")->capture_default_str();
  sc->add_option("--csv", a->csv, "also write the table to this CSV file");
  sc->final_callback([a] { run(*a); });
}

}  // namespace vla::cli
