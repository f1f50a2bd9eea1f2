// gpu/train/trainer.hpp: GpuModel as a step engine of core/train/trainer.cpp's loop.
#include "gpu/train/trainer.hpp"

#include "gpu/cuda_check.hpp"
#include "gpu/device_query.hpp"
#include "gpu/train/gpu_engine.hpp"
#include "gpu/train/model.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace vla::gpu::train {

namespace {

// Before anything is written: a clear message instead of the first cudaMalloc's driver error.
void require_device() {
  if (device_count() == 0) throw std::runtime_error("no CUDA device visible: GPU training needs one (use `vla train` on the CPU)");
}

// The runs of this process on each visible GPU. A run starts on the GPU with the fewest (the lowest
// index among equals), so concurrent runs, also those that sweep workers start one at a time, spread
// evenly over every GPU; with one GPU every run is on GPU 0.
class GpuLoad {
 public:
  int acquire() {
    std::lock_guard<std::mutex> lock(mu_);
    if (runs_.empty()) runs_.assign(std::size_t(std::max(1, device_count())), 0);
    const auto it = std::min_element(runs_.begin(), runs_.end());
    ++*it;
    return int(it - runs_.begin());
  }
  void release(int device) {
    std::lock_guard<std::mutex> lock(mu_);
    --runs_[std::size_t(device)];
  }

 private:
  std::mutex mu_;
  std::vector<int> runs_;
};
GpuLoad& gpu_load() {
  static GpuLoad load;
  return load;
}

// Runs job(i, cuda_device(stream i)) for i < n, each on its own host thread and non-blocking stream, on
// the least loaded GPU (a run computes the same bits on any GPU of the same kind); rethrows the first
// run's error once all have ended.
void run_concurrently(std::size_t n, const vla::train::Device::Job& job) {
  require_device();
  std::vector<std::exception_ptr> err(n);
  std::vector<std::thread> pool;
  for (std::size_t i = 0; i < n; ++i)
    pool.emplace_back([&, i] {
      const int gpu = gpu_load().acquire();
      cudaStream_t s = nullptr;
      try {
        check(cudaSetDevice(gpu), "cudaSetDevice");  // this thread's stream, model and cuBLAS handle live there
        check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
        job(i, cuda_device(s));
      } catch (...) {
        err[i] = std::current_exception();
      }
      if (s) cudaStreamDestroy(s);
      gpu_load().release(gpu);
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
  d.make = [stream](const vla::train::TrainConfig& c, const vla::train::RunOptions& ro) -> std::unique_ptr<vla::train::StepEngine> {
    const RecurrentForm form = recurrent_form(ro.recurrent_form);  // throws naming --recurrent-form
    validate_gpu_config(c.model, form);                           // before the device is needed
    require_device();
    return std::make_unique<GpuEngine<GpuModel>>(c, stream, form);
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
