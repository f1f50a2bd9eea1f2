// gpu/train/trainer.hpp: GpuModel as a step engine of core/train/trainer.cpp's loop.
#include "gpu/train/trainer.hpp"

#include "gpu/cuda_check.hpp"
#include "gpu/device_query.hpp"
#include "gpu/train/model.hpp"

#include <fmt/format.h>

#include <cmath>
#include <mutex>
#include <thread>

namespace vla::gpu::train {

namespace {

// Before anything is written: a clear message instead of the first cudaMalloc's driver error.
void require_device() {
  if (device_count() == 0) throw std::runtime_error("no CUDA device visible: GPU training needs one (use `vla train` on the CPU)");
}

class GpuEngine final : public vla::train::StepEngine {
 public:
  GpuEngine(const vla::train::TrainConfig& c, cudaStream_t stream)
      : m_(c.model, model::init_params<float>(c.model, c.seed), stream), stream_(stream) {}
  vla::train::BatchResult forward(const vla::train::Batch& b, bool gradient) override {
    GpuBatchResult r = m_.forward_backward(b, gradient);
    return {r.loss, r.accuracy, std::move(r.S_fro), std::move(r.A_fro), {}};
  }
  double grad_norm(std::string* nonfinite_tensor) override {
    const double n = m_.grad_norm();
    if (!std::isfinite(n)) *nonfinite_tensor = "gradient";  // one fused reduction: the tensor is not known
    return n;
  }
  void apply(const vla::train::AdamWConfig& c, double lr, double clip_scale) override {
    m_.adamw_step(c, lr, clip_scale);
    // The loop times the step: wait for the update (the next forward would wait for it anyway).
    check(cudaStreamSynchronize(stream_), "train step (sync)");
  }
  void export_state(model::Params<float>& p, vla::train::AdamWState<float>& opt) const override {
    p = m_.params();
    opt.step = m_.adam_moments(opt.m, opt.v);
  }
  void import_state(const model::Params<float>& p, const vla::train::AdamWState<float>& opt) override {
    m_.set_params(p);
    m_.set_adam_moments(opt.m, opt.v, opt.step);
  }

 private:
  GpuModel m_;
  cudaStream_t stream_;
};

vla::train::RunOptions with_progress(const std::function<void(const std::string&)>& progress) {
  vla::train::RunOptions ro;
  ro.progress = progress;
  ro.progress_every = 0;  // every ~10% of the steps: a GPU step takes milliseconds
  return ro;
}

}  // namespace

vla::train::Device cuda_device(cudaStream_t stream) {
  return {"cuda", [stream](const vla::train::TrainConfig& c, const vla::train::RunOptions&) -> std::unique_ptr<vla::train::StepEngine> {
            validate_gpu_config(c.model);
            require_device();
            return std::make_unique<GpuEngine>(c, stream);
          }};
}

GpuTrainResult train_gpu(const vla::train::TrainConfig& cfg, const std::filesystem::path& dir, const vla::train::RunOptions& ro,
                         cudaStream_t stream) {
  return vla::train::train(cfg, dir, ro, cuda_device(stream));
}

GpuTrainResult resume_gpu(const std::filesystem::path& dir, const vla::train::RunOptions& ro, cudaStream_t stream) {
  return vla::train::resume(dir, ro, cuda_device(stream));
}

GpuTrainResult train_gpu(const vla::train::TrainConfig& cfg, const std::filesystem::path& dir,
                         const std::function<void(const std::string&)>& progress, cudaStream_t stream) {
  return train_gpu(cfg, dir, with_progress(progress), stream);
}

namespace {
// One host thread and one non-blocking stream per run; one(i, run options, stream) runs run i.
template <class One>
std::vector<GpuTrainResult> run_many(std::size_t n, const std::function<void(const std::string&)>& progress,
                                     const vla::train::RunOptions& ro, One one) {
  require_device();
  std::vector<GpuTrainResult> res(n);
  std::vector<std::exception_ptr> err(n);
  std::vector<std::thread> pool;
  std::mutex mu;
  for (std::size_t i = 0; i < n; ++i)
    pool.emplace_back([&, i] {
      cudaStream_t s = nullptr;
      try {
        check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
        vla::train::RunOptions r = ro;  // stop_after and interrupt stop every run
        r.progress = nullptr;
        r.progress_every = 0;  // every ~10% of the run's steps
        if (progress)
          r.progress = [&, i](const std::string& line) { std::lock_guard<std::mutex> lk(mu); progress(fmt::format("run {}: {}", i, line)); };
        res[i] = one(i, r, s);
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
}  // namespace

std::vector<GpuTrainResult> train_gpu_many(const std::vector<vla::train::TrainConfig>& cfgs,
                                           const std::vector<std::filesystem::path>& dirs,
                                           const std::function<void(const std::string&)>& progress,
                                           const vla::train::RunOptions& ro) {
  if (dirs.size() != cfgs.size()) throw std::invalid_argument("train_gpu_many: one output folder per run");
  for (const auto& c : cfgs) { c.validate(); validate_gpu_config(c.model); }  // reject before any run starts
  return run_many(cfgs.size(), progress, ro, [&](std::size_t i, const vla::train::RunOptions& r, cudaStream_t s) {
    return train_gpu(cfgs[i], dirs[i], r, s);
  });
}

std::vector<GpuTrainResult> resume_gpu_many(const std::vector<std::filesystem::path>& dirs,
                                            const std::function<void(const std::string&)>& progress,
                                            const vla::train::RunOptions& ro) {
  for (const auto& d : dirs)  // reject before any run continues: a missing or non-GPU checkpoint
    if (const auto dev = vla::train::checkpoint_device(d); dev != "cuda")
      throw std::invalid_argument(fmt::format("--device: the run in '{}' was trained on {}; resume it with `vla train --resume`", d.string(), dev));
  return run_many(dirs.size(), progress, ro, [&](std::size_t i, const vla::train::RunOptions& r, cudaStream_t s) {
    return resume_gpu(dirs[i], r, s);
  });
}

}  // namespace vla::gpu::train
