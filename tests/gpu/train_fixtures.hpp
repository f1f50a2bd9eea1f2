#pragma once
// What the GPU training tests share: the small model and run they train, the CPU's float64 gradient
// every fp32 gradient is measured against, and bitwise comparisons of logs and files.
#include "core/model/transformer.hpp"
#include "core/train/cpu_engine.hpp"
#include "core/train/trainer.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace vla::gpu::train::testing {

using vla::model::ModelConfig;
using vla::model::Params;

inline constexpr double kU = 5.9604644775390625e-08;  // fp32 unit roundoff 2^-24

inline ModelConfig small_model(const std::string& mixer) {
  ModelConfig c;
  c.d_model = 32; c.heads = 2; c.d_head = 16; c.ffn = 64; c.layers = 2;  // vocab 128 (the tasks' vocabulary)
  c.mixer.mixer = mixer;
  return c;
}

inline vla::train::TaskConfig mqar(int pairs) {
  vla::train::TaskConfig t;
  t.task = "mqar";
  t.pairs = pairs;
  return t;
}

// A short training run of small_model(mixer) on MQAR with 4 pairs, one held-out batch.
inline vla::train::TrainConfig small_run(const std::string& mixer, int steps, int batch, std::uint64_t seed) {
  vla::train::TrainConfig tc;
  tc.model = small_model(mixer);
  tc.task = mqar(4);
  tc.steps = steps;
  tc.batch = batch;
  tc.seed = seed;
  tc.eval_batches = 1;
  return tc;
}

// Mean gradient of the batch in double (the reference both fp32 paths are measured against).
inline double cpu_double_gradient(const ModelConfig& c, const Params<float>& p, const vla::train::Batch& b, Params<double>& g) {
  const Params<double> pd = p.cast<double>();
  g = pd.zeros_like();
  int targets = 0;
  for (const auto& tg : b.targets) targets += int(std::count_if(tg.begin(), tg.end(), [](int x) { return x >= 0; }));
  const double scale = 1.0 / targets;
  double loss = 0;
  for (std::size_t s = 0; s < b.tokens.size(); ++s)
    loss += vla::model::sequence_forward_backward<double>(c, pd, b.tokens[s], b.targets[s], scale, &g).loss_sum;
  return loss * scale;
}

inline double rel_err(const vla::Mat<float>& x, const vla::Mat<double>& ref) {
  const double n = ref.norm();
  return (x.cast<double>() - ref).norm() / (n > 0 ? n : 1.0);
}

// Bitwise equality of log rows (== would call two NaN cells, e.g. eval_accuracy between evaluations, different).
inline bool same_bits(const std::vector<std::vector<double>>& a, const std::vector<std::vector<double>>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(double)) != 0) return false;
  return true;
}

inline std::string read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// What an fp32 gradient of the batch is measured against: the CPU's float64 gradient and loss, and the
// CPU's own float path on the same batch (its error against float64 is the yardstick, test_gpu_train.cpp).
struct CpuReference {
  Params<double> g64;
  double loss64 = 0;
  Params<float> g32;
  double loss32 = 0, accuracy32 = 0;
  // The bound an fp32 path's relative error must meet where the CPU float path's is `cpu_err`.
  static double bound(double cpu_err) { return std::max(10 * cpu_err, 64 * kU); }
};
inline CpuReference cpu_reference(const ModelConfig& c, const Params<float>& p, const vla::train::Batch& b) {
  CpuReference r;
  r.loss64 = cpu_double_gradient(c, p, b, r.g64);
  const auto rf = vla::train::batch_gradient(c, p, b, &r.g32, 0);
  r.loss32 = rf.loss;
  r.accuracy32 = rf.accuracy;
  return r;
}

// A resumed run against the uninterrupted one, bit for bit: its last step, every loss and log row,
// log.csv's bytes and the final parameters (Catch checks, reported in the calling test).
inline void check_same_run(const vla::train::TrainResult& rest, const vla::train::TrainResult& full, const std::filesystem::path& rest_dir,
                           const std::filesystem::path& full_dir) {
  CHECK(rest.steps_done == full.steps_done);
  CHECK(rest.losses == full.losses);
  CHECK(same_bits(rest.log, full.log));
  CHECK(read_bytes(rest_dir / "log.csv") == read_bytes(full_dir / "log.csv"));
  for (std::size_t i = 0; i < full.params.t.size(); ++i) CHECK(rest.params.t[i] == full.params.t[i]);
}

// Two loss curves of the same seed (200 steps) against each other, as the curve-parity tests bound them:
// step 1's relative difference (same weights and batch: forward rounding only), the largest over steps
// 2-10 (the updates' rounding, which Adam can amplify), and the mean of the last 20 losses of each.
struct CurveGap {
  double step1 = 0, early = 0, mean_ref = 0, mean_other = 0;
};
inline CurveGap curve_gap(const std::vector<double>& ref, const std::vector<double>& other) {
  CurveGap g;
  auto rel = [&](std::size_t s) { return std::abs(other[s] - ref[s]) / ref[s]; };
  g.step1 = rel(0);
  for (std::size_t s = 1; s < 10; ++s) g.early = std::max(g.early, rel(s));
  for (std::size_t s = ref.size() - 20; s < ref.size(); ++s) {
    g.mean_ref += ref[s] / 20;
    g.mean_other += other[s] / 20;
  }
  return g;
}

}  // namespace vla::gpu::train::testing
