// gpu/train/trainer.hpp: the CPU trainer's loop (core/train/trainer.cpp) with the batch gradient and
// the AdamW update on the GPU.
#include "gpu/train/trainer.hpp"

#include "core/io/atomic_file.hpp"
#include "core/io/csv.hpp"
#include "core/io/provenance.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_query.hpp"
#include "gpu/train/model.hpp"

#include <chrono>
#include <mutex>
#include <thread>
#include <cmath>
#include <fmt/format.h>

namespace vla::gpu::train {

using io::CsvTable;
using io::provenance;
using io::write_text_atomically;

namespace {
// Held-out evaluation seed: must equal core/train/trainer.cpp's eval_seed (not in its public header),
// so that CPU and GPU runs report accuracy on the same 960 held-out samples.
std::uint64_t eval_seed(std::uint64_t seed) { return seed ^ 0xE7A1E7A1D00DFEEDULL; }

// Before anything is written: a clear message instead of the first cudaMalloc's driver error.
void require_device() {
  if (device_count() == 0) throw std::runtime_error("no CUDA device visible: GPU training needs one (use `vla train` on the CPU)");
}

double evaluate(const vla::train::TrainConfig& c, GpuModel& m) {
  double correct = 0, targets = 0;
  for (int i = 0; i < c.eval_batches; ++i) {
    const auto b = vla::train::make_batch(c.task, c.eval_batch, vla::train::batch_seed(eval_seed(c.seed), std::uint64_t(i)), c.ood);
    const GpuBatchResult r = m.forward_backward(b, false);
    correct += r.accuracy * r.targets;
    targets += r.targets;
  }
  return correct / std::max(1.0, targets);
}
}  // namespace

GpuTrainResult train_gpu(const vla::train::TrainConfig& c, const std::filesystem::path& dir,
                         const std::function<void(const std::string&)>& progress, cudaStream_t stream) {
  c.validate();
  validate_gpu_config(c.model);
  require_device();
  if (!dir.empty()) std::filesystem::create_directories(dir);
  GpuModel m(c.model, model::init_params<float>(c.model, c.seed), stream);
  GpuTrainResult res;
  CsvTable log({"step", "loss", "train_accuracy", "lr", "grad_norm", "eval_accuracy", "step_ms"});
  const auto t0 = std::chrono::steady_clock::now();
  double eval_acc = std::nan("");
  for (int s = 0; s < c.steps; ++s) {
    const auto ts = std::chrono::steady_clock::now();
    const auto b = vla::train::make_batch(c.task, c.batch, vla::train::batch_seed(c.seed, std::uint64_t(s)));
    const GpuBatchResult r = m.forward_backward(b, true);
    const double gnorm = m.grad_norm();
    if (!std::isfinite(r.loss) || !std::isfinite(gnorm))
      throw std::runtime_error(fmt::format("step {}: non-finite loss ({}) or gradient norm ({}) on the GPU", s + 1, r.loss, gnorm));
    const double gscale = gnorm > c.opt.clip ? double(float(c.opt.clip / gnorm)) : 1.0;  // the CPU's m *= float(clip / gnorm)
    const double lr = vla::train::learning_rate(c.opt, s, c.steps);
    m.adamw_step(c.opt, lr, gscale);
    check(cudaStreamSynchronize(stream), "train step (sync)");
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - ts).count();
    res.step_ms += ms;
    res.losses.push_back(r.loss);
    const bool do_eval = s + 1 == c.steps || (c.eval_every > 0 && (s + 1) % c.eval_every == 0);
    eval_acc = do_eval ? evaluate(c, m) : std::nan("");
    log.add_row({double(s + 1), r.loss, r.accuracy, lr, gnorm, eval_acc, ms});
    if (progress && (c.steps < 10 || (s + 1) % std::max(1, c.steps / 10) == 0 || s + 1 == c.steps))
      progress(fmt::format("step {}/{} loss {:.4f} acc {:.3f} {:.2f} ms/step", s + 1, c.steps, r.loss, r.accuracy, res.step_ms / (s + 1)));
  }
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  res.step_ms /= std::max(1, c.steps);
  res.final_loss = res.losses.empty() ? 0.0 : res.losses.back();
  res.eval_accuracy = eval_acc;
  res.params = m.params();
  if (!dir.empty()) {
    log.write(dir / "log.csv");
    nlohmann::json j;
    j["config"] = c.to_json();
    j["device"] = "cuda";
    j["final_loss"] = res.final_loss;
    j["eval_accuracy"] = res.eval_accuracy;
    j["wall_s"] = res.wall_s;
    j["step_ms"] = res.step_ms;
    j["provenance"] = provenance("cuda");
    write_text_atomically(dir / "summary.json", j.dump(2) + "\n");
  }
  return res;
}

std::vector<GpuTrainResult> train_gpu_many(const std::vector<vla::train::TrainConfig>& cfgs,
                                           const std::vector<std::filesystem::path>& dirs,
                                           const std::function<void(const std::string&)>& progress) {
  if (dirs.size() != cfgs.size()) throw std::invalid_argument("train_gpu_many: one output folder per run");
  for (const auto& c : cfgs) { c.validate(); validate_gpu_config(c.model); }  // reject before any run starts
  require_device();
  std::vector<GpuTrainResult> res(cfgs.size());
  std::vector<std::exception_ptr> err(cfgs.size());
  std::vector<std::thread> pool;
  std::mutex mu;
  for (std::size_t i = 0; i < cfgs.size(); ++i)
    pool.emplace_back([&, i] {
      cudaStream_t s = nullptr;
      try {
        check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
        std::function<void(const std::string&)> pr;
        if (progress) pr = [&, i](const std::string& line) { std::lock_guard<std::mutex> lk(mu); progress(fmt::format("run {}: {}", i, line)); };
        res[i] = train_gpu(cfgs[i], dirs[i], pr, s);
      } catch (...) {
        err[i] = std::current_exception();
      }
      if (s) cudaStreamDestroy(s);
    });
  for (auto& t : pool) t.join();
  for (auto& e : err)
    if (e) std::rethrow_exception(e);
  return res;
}

}  // namespace vla::gpu::train
