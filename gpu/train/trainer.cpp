// gpu/train/trainer.hpp: GpuModel as a step engine of core/train/trainer.cpp's loop.
#include "gpu/train/trainer.hpp"

#include "gpu/cuda_check.hpp"
#include "gpu/device_query.hpp"
#include "gpu/train/model.hpp"

#include <cmath>
#include <exception>
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

// Runs job(i, cuda_device(stream i)) for i < n, each on its own host thread and non-blocking stream;
// rethrows the first run's error once all have ended.
void run_concurrently(std::size_t n, const vla::train::Device::Job& job) {
  require_device();
  std::vector<std::exception_ptr> err(n);
  std::vector<std::thread> pool;
  for (std::size_t i = 0; i < n; ++i)
    pool.emplace_back([&, i] {
      cudaStream_t s = nullptr;
      try {
        check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
        job(i, cuda_device(s));
      } catch (...) {
        err[i] = std::current_exception();
      }
      if (s) cudaStreamDestroy(s);
    });
  for (auto& t : pool) t.join();
  for (auto& e : err)
    if (e) std::rethrow_exception(e);
}

}  // namespace

vla::train::Device cuda_device(cudaStream_t stream) {
  vla::train::Device d;
  d.name = "cuda";
  d.check = [](const vla::train::TrainConfig& c) { validate_gpu_config(c.model); };
  d.make = [stream](const vla::train::TrainConfig& c, const vla::train::RunOptions&) -> std::unique_ptr<vla::train::StepEngine> {
    validate_gpu_config(c.model);
    require_device();
    return std::make_unique<GpuEngine>(c, stream);
  };
  d.run_many = run_concurrently;
  return d;
}

GpuTrainResult train_gpu(const vla::train::TrainConfig& cfg, const std::filesystem::path& dir, const vla::train::RunOptions& ro,
                         cudaStream_t stream) {
  return vla::train::train(cfg, dir, ro, cuda_device(stream));
}

GpuTrainResult resume_gpu(const std::filesystem::path& dir, const vla::train::RunOptions& ro, cudaStream_t stream) {
  return vla::train::resume(dir, ro, cuda_device(stream));
}

}  // namespace vla::gpu::train
