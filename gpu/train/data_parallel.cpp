// gpu/train/data_parallel.hpp: N replicas of GpuModel, one per GPU, and an NCCL all-reduce of their
// gradients.
#include "gpu/train/data_parallel.hpp"

#include "core/train/train_config.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_query.hpp"
#include "gpu/train/gpu_engine.hpp"
#include "gpu/train/trainer.hpp"

#include <nccl.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <stdexcept>
#include <thread>
#include <vector>

namespace vla::gpu::train {

namespace {

void check_nccl(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw std::runtime_error(fmt::format("NCCL error in {}: {}", what, ncclGetErrorString(r)));
}

// The sequences [B i / n, B (i + 1) / n) of b: GPU i's part of the step (n <= B, so none is empty).
vla::train::Batch part(const vla::train::Batch& b, int i, int n) {
  const std::size_t B = b.tokens.size(), lo = B * i / n, hi = B * (i + 1) / n;
  vla::train::Batch p;
  p.tokens.assign(b.tokens.begin() + lo, b.tokens.begin() + hi);
  p.targets.assign(b.targets.begin() + lo, b.targets.begin() + hi);
  return p;
}

int count_targets(const vla::train::Batch& b) {
  int n = 0;
  for (const auto& t : b.targets) n += int(std::count_if(t.begin(), t.end(), [](int x) { return x >= 0; }));
  return n;
}

}  // namespace

struct DataParallelModel::Impl {
  struct Replica {
    int device = 0;
    cudaStream_t stream = nullptr;
    ncclComm_t comm = nullptr;
    std::unique_ptr<GpuModel> model;
  };
  std::vector<Replica> r;
  double all_reduce_ms = 0;

  ~Impl() {
    for (Replica& x : r) {
      x.model.reset();
      if (x.comm) ncclCommDestroy(x.comm);
      if (x.stream) {
        DeviceGuard on(x.device);
        cudaStreamDestroy(x.stream);
      }
    }
  }

  // In place, on each replica's stream: G_i <- sum_j G_j. One thread drives every GPU, so the calls
  // are grouped (NCCL's one-process, several-devices pattern).
  void all_reduce_gradients() {
    const auto t0 = std::chrono::steady_clock::now();
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    for (Replica& x : r) {
      const GpuModel::DeviceArray g = x.model->gradient();
      check_nccl(ncclAllReduce(g.data, g.data, g.n, ncclFloat, ncclSum, x.comm, g.stream), "ncclAllReduce (gradient)");
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd");
    for (Replica& x : r) x.model->synchronize();
    all_reduce_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
};

DataParallelModel::DataParallelModel(const model::ModelConfig& cfg, const model::Params<float>& p, int gpus)
    : impl_(std::make_unique<Impl>()) {
  validate_gpu_config(cfg);
  if (gpus < 2) throw std::invalid_argument(fmt::format("--device: cuda:N data parallel needs N >= 2 GPUs, got {}", gpus));
  const int visible = device_count();
  if (visible < gpus)
    throw std::invalid_argument(fmt::format("--device: cuda:{} asks for {} GPUs, {} visible (CUDA_VISIBLE_DEVICES)", gpus, gpus, visible));
  auto& r = impl_->r;
  r.resize(gpus);
  std::vector<int> devices(gpus);
  std::vector<ncclComm_t> comms(gpus);
  for (int i = 0; i < gpus; ++i) devices[i] = i;
  check_nccl(ncclCommInitAll(comms.data(), gpus, devices.data()), "ncclCommInitAll");
  for (int i = 0; i < gpus; ++i) {
    r[i].device = i;
    r[i].comm = comms[i];
  }
  for (int i = 0; i < gpus; ++i) {
    DeviceGuard on(i);  // the replica's stream, buffers and cuBLAS handle live on GPU i
    check(cudaStreamCreateWithFlags(&r[i].stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    r[i].model = std::make_unique<GpuModel>(cfg, p, r[i].stream);
  }
}

DataParallelModel::~DataParallelModel() = default;

int DataParallelModel::gpus() const { return int(impl_->r.size()); }

GpuBatchResult DataParallelModel::forward_backward(const vla::train::Batch& b, bool backward) {
  auto& r = impl_->r;
  const int n = gpus(), B = int(b.tokens.size());
  if (B < n) throw std::invalid_argument(fmt::format("--batch: {} sequences cannot be split over {} GPUs (at least one each)", B, n));
  const int step_targets = count_targets(b);
  // The parts run at once, one host thread each (forward_backward waits for its GPU).
  std::vector<GpuBatchResult> res(n);
  std::vector<int> seqs(n);
  std::vector<std::exception_ptr> err(n);
  std::vector<std::thread> pool;
  for (int i = 0; i < n; ++i)
    pool.emplace_back([&, i] {
      try {
        const vla::train::Batch p = part(b, i, n);
        seqs[i] = int(p.tokens.size());
        res[i] = r[i].model->forward_backward(p, backward, step_targets);
      } catch (...) {
        err[i] = std::current_exception();
      }
    });
  for (auto& t : pool) t.join();
  for (auto& e : err)
    if (e) std::rethrow_exception(e);
  if (backward) impl_->all_reduce_gradients();

  // Each part's loss is its CE sum over the step's targets, so the step's mean is their sum; the S/A
  // norms are means over sequences, so the parts' are weighted by their sequences.
  GpuBatchResult out;
  for (const auto& x : res) {
    out.loss += x.loss;
    out.correct += x.correct;
    out.targets += x.targets;
  }
  out.accuracy = double(out.correct) / std::max(1, out.targets);
  if (backward) {
    out.S_fro.assign(res[0].S_fro.size(), 0.0);
    out.A_fro.assign(res[0].A_fro.size(), 0.0);
    for (int i = 0; i < n; ++i)
      for (std::size_t l = 0; l < out.S_fro.size(); ++l) {
        out.S_fro[l] += res[i].S_fro[l] * seqs[i] / B;
        out.A_fro[l] += res[i].A_fro[l] * seqs[i] / B;
      }
  }
  return out;
}

double DataParallelModel::last_all_reduce_ms() const { return impl_->all_reduce_ms; }

double DataParallelModel::grad_norm() const { return impl_->r[0].model->grad_norm(); }

void DataParallelModel::adamw_step(const vla::train::AdamWConfig& c, double lr, double gscale) {
  for (auto& x : impl_->r) x.model->adamw_step(c, lr, gscale);  // queued on each GPU's stream: they run at once
}

void DataParallelModel::synchronize() const {
  for (const auto& x : impl_->r) x.model->synchronize();
}

model::Params<float> DataParallelModel::params(int replica) const { return impl_->r.at(std::size_t(replica)).model->params(); }
model::Params<float> DataParallelModel::grads(int replica) const { return impl_->r.at(std::size_t(replica)).model->grads(); }

void DataParallelModel::set_params(const model::Params<float>& p) {
  for (auto& x : impl_->r) x.model->set_params(p);
}

long DataParallelModel::adam_moments(model::Params<float>& m, model::Params<float>& v) const {
  return impl_->r[0].model->adam_moments(m, v);
}

void DataParallelModel::set_adam_moments(const model::Params<float>& m, const model::Params<float>& v, long step) {
  for (auto& x : impl_->r) x.model->set_adam_moments(m, v, step);
}

vla::train::Device cuda_data_parallel_device(int gpus) {
  if (gpus < 1) throw std::invalid_argument(fmt::format("--device: cuda:N needs N >= 1 GPUs, got {}", gpus));
  if (gpus == 1) return cuda_device();
  vla::train::Device d;
  d.name = fmt::format("cuda:{}", gpus);
  d.check = [gpus](const vla::train::TrainConfig& c) {
    validate_gpu_config(c.model);
    if (c.batch < gpus || c.eval_batch < gpus)
      throw std::invalid_argument(fmt::format("--batch: {} sequences per step ({} per evaluation batch) cannot be split over {} GPUs "
                                              "(at least one each)", c.batch, c.eval_batch, gpus));
  };
  d.make = [gpus, check = d.check](const vla::train::TrainConfig& c, const vla::train::RunOptions&) -> std::unique_ptr<vla::train::StepEngine> {
    check(c);
    return std::make_unique<GpuEngine<DataParallelModel>>(c, gpus);
  };
  return d;  // run_many empty: runs one after another, each on every GPU
}

}  // namespace vla::gpu::train
