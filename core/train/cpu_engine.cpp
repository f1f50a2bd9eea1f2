#include "core/train/cpu_engine.hpp"

#include "core/train/trainer.hpp"

#include <atomic>
#include <cmath>
#include <mutex>
#include <thread>

namespace vla::train {

using model::Params;

namespace {
int batch_targets(const Batch& b) {
  int n = 0;
  for (const auto& tg : b.targets)
    for (int x : tg) n += x >= 0;
  return n;
}
}  // namespace

std::vector<ShardResult> shard_gradients(const model::ModelConfig& cfg, const Params<float>& p, const Batch& b,
                                         const std::vector<int>& which, bool gradient, int threads) {
  const int B = static_cast<int>(b.tokens.size());
  const double scale = 1.0 / std::max(1, batch_targets(b));
  std::vector<ShardResult> shards(which.size());
  auto run_shard = [&](std::size_t j) {
    const int i = which[j];
    ShardResult& sh = shards[j];
    if (gradient) sh.g = p.zeros_like();
    sh.S.assign(cfg.layers, 0.0);
    sh.A.assign(cfg.layers, 0.0);
    for (int s = i * B / kShards; s < (i + 1) * B / kShards; ++s) {
      const auto r = model::sequence_forward_backward<float>(cfg, p, b.tokens[s], b.targets[s], scale, gradient ? &sh.g : nullptr);
      sh.loss += r.loss_sum;
      sh.correct += r.correct;
      for (int l = 0; l < cfg.layers; ++l) { sh.S[l] += r.S_fro[l]; sh.A[l] += r.A_fro[l]; }
      if (sh.nonfinite.empty() && !r.nonfinite.empty()) sh.nonfinite = fmt::format("sequence {}: {}", s, r.nonfinite);
    }
  };
  const int n = static_cast<int>(which.size());
  const int nt = std::max(1, std::min(n, threads > 0 ? threads : int(std::thread::hardware_concurrency())));
  std::atomic<int> next{0};
  std::vector<std::thread> pool;
  std::exception_ptr err;
  std::mutex err_mu;
  auto worker = [&] {
    for (int j = next++; j < n; j = next++) {
      try { run_shard(std::size_t(j)); } catch (...) { std::lock_guard<std::mutex> lk(err_mu); if (!err) err = std::current_exception(); }
    }
  };
  for (int t = 1; t < nt; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (err) std::rethrow_exception(err);
  return shards;
}

BatchResult reduce_shards(const model::ModelConfig& cfg, std::vector<ShardResult>& shards, const Batch& b, Params<float>* grad) {
  const int B = static_cast<int>(b.tokens.size()), total_targets = batch_targets(b);
  BatchResult r;
  r.S_fro.assign(cfg.layers, 0.0);
  r.A_fro.assign(cfg.layers, 0.0);
  int correct = 0;
  for (int i = 0; i < kShards; ++i) {  // fixed reduction order
    r.loss += shards[i].loss;
    correct += shards[i].correct;
    for (int l = 0; l < cfg.layers; ++l) { r.S_fro[l] += shards[i].S[l]; r.A_fro[l] += shards[i].A[l]; }
    if (r.nonfinite.empty()) r.nonfinite = shards[i].nonfinite;
    if (grad) {
      if (i == 0) *grad = std::move(shards[0].g);
      else for (std::size_t k = 0; k < grad->t.size(); ++k) grad->t[k] += shards[i].g.t[k];
    }
  }
  r.loss *= 1.0 / std::max(1, total_targets);
  r.accuracy = double(correct) / std::max(1, total_targets);
  for (int l = 0; l < cfg.layers; ++l) { r.S_fro[l] /= B; r.A_fro[l] /= B; }
  return r;
}

BatchResult batch_gradient(const model::ModelConfig& cfg, const Params<float>& p, const Batch& b, Params<float>* grad,
                           int threads) {
  std::vector<int> all(kShards);
  for (int i = 0; i < kShards; ++i) all[i] = i;
  auto shards = shard_gradients(cfg, p, b, all, grad != nullptr, threads);
  return reduce_shards(cfg, shards, b, grad);
}

namespace {

// A batch function (batch_gradient, or one that spreads the shards over ranks) and adamw_update on the host.
class CpuEngine final : public StepEngine {
 public:
  CpuEngine(const TrainConfig& c, int threads, BatchFunction batch)
      : cfg_(c.model), threads_(threads), batch_(std::move(batch)), p_(model::init_params<float>(c.model, c.seed)) {
    opt_.m = p_.zeros_like();
    opt_.v = p_.zeros_like();
  }
  BatchResult forward(const Batch& b, bool gradient) override {
    return batch_(cfg_, p_, b, gradient ? &g_ : nullptr, threads_);
  }
  double grad_norm(std::string* nonfinite_tensor) override {
    double sq = 0;
    for (std::size_t i = 0; i < g_.t.size(); ++i) {
      const double n2 = g_.t[i].template cast<double>().squaredNorm();
      if (!std::isfinite(n2)) { *nonfinite_tensor = g_.names[i]; return n2; }
      sq += n2;
    }
    return std::sqrt(sq);
  }
  void apply(const AdamWConfig& c, double lr, double clip_scale) override {
    if (clip_scale != 1.0)
      for (auto& m : g_.t) m *= float(clip_scale);
    adamw_update(c, lr, p_, g_, opt_);
  }
  void export_state(Params<float>& p, AdamWState<float>& opt) const override { p = p_; opt = opt_; }
  void import_state(const Params<float>& p, const AdamWState<float>& opt) override { p_ = p; opt_ = opt; }

 private:
  model::ModelConfig cfg_;
  int threads_;
  BatchFunction batch_;
  Params<float> p_, g_;
  AdamWState<float> opt_;
};

}  // namespace

std::unique_ptr<StepEngine> make_cpu_engine(const TrainConfig& c, int threads, BatchFunction batch) {
  return std::make_unique<CpuEngine>(c, threads, std::move(batch));
}

Device cpu_device() {
  // No check beyond TrainConfig::validate; runs one after another (the engine uses every core).
  return {.name = "cpu",
          .make = [](const TrainConfig& c, const RunOptions& ro) -> std::unique_ptr<StepEngine> {
            return make_cpu_engine(c, ro.threads);
          },
          .check = {},
          .run_many = {}};
}

}  // namespace vla::train
