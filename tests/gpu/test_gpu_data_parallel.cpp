// Data-parallel training over GPUs (gpu/train/data_parallel.hpp) against one GPU and the CPU: its
// gradient is as accurate as one GPU's, its replicas stay equal, its loss curve follows the one-GPU
// curve, it is deterministic, and a stopped run resumes to the uninterrupted one. The device's name
// ("cuda:N") is parsed and refused with the parameter named on any machine; the [gpu] cases need at
// least two CUDA devices and skip (saying so) elsewhere.
#include "cli/training_device.hpp"
#include "core/train/trainer.hpp"
#include "gpu/device_query.hpp"
#include "gpu/train/model.hpp"
#include "gpu/train/trainer.hpp"
#include "tests/gpu/train_fixtures.hpp"
#ifdef VLA_HAVE_NCCL
#include "gpu/train/data_parallel.hpp"
#endif

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>

using namespace vla::gpu::train::testing;

// A misspelt device must be refused naming --device, never read as another one (cuda:0 as cuda, or
// "cuda:2x" as two GPUs); cuda:1 is the one-GPU device. Needs no GPU: CI runs it.
TEST_CASE("the device name cuda:N is parsed strictly (--device) and cuda:1 is the one-GPU device", "[gpu-train]") {
  for (const char* bad : {"cuda:", "cuda:0", "cuda:x", "cuda:2x", "cuda:-1", "cuda:1000", "gpu", "cuda2"})
    CHECK_THROWS_WITH(vla::cli::training_device(bad), Catch::Contains("--device") && Catch::Contains("cuda:N"));
  CHECK(vla::cli::training_device("cuda:1").name == "cuda");
  CHECK(vla::cli::training_device("cuda").name == "cuda");
#ifdef VLA_HAVE_NCCL
  const auto d = vla::cli::training_device("cuda:2");
  CHECK(d.name == "cuda:2");
  auto tc = small_run("vla", 2, 1, 0);  // one sequence cannot be split over two GPUs
  CHECK_THROWS_WITH(d.check(tc), Catch::Contains("--batch"));
  tc = small_run("vla-v2", 2, 8, 0);    // no GPU path: named before any device work
  CHECK_THROWS_WITH(d.check(tc), Catch::Contains("--mixer"));
#endif
}

#ifdef VLA_HAVE_NCCL

namespace {
bool two_gpus() { return vla::gpu::device_count() >= 2; }
}  // namespace

// The gradient of one step split over 2 GPUs and summed by ncclAllReduce, against the CPU's float64
// gradient, with test_gpu_train.cpp's bound for one GPU (within 10x of the CPU float path's own error,
// floor 64 u): the split changes only the order of the sums (N GEMMs over half the rows and a 2-term
// sum instead of one GEMM), which that bound covers for any order. A part averaged over its own targets
// instead of the step's, a part left out, or a sum where a mean belongs is off by O(1). The batch has 7
// sequences, so the parts are uneven (3 and 4). After the all-reduce both replicas must hold the same
// gradient bit for bit: an all-reduce gives every rank the same sums.
TEST_CASE("a data-parallel step's gradient over 2 GPUs meets the one-GPU bound against float64", "[gpu][gpu-dp]") {
  if (!two_gpus()) { WARN("fewer than 2 CUDA devices visible: the data-parallel test is skipped"); return; }
  for (const std::string mixer : {"vla", "linear", "deltanet", "softmax"}) {
    const ModelConfig c = small_model(mixer);
    const Params<float> p = vla::model::init_params<float>(c, 7);
    const auto batch = vla::train::make_batch(mqar(4), 7, vla::train::batch_seed(3, 0));
    const CpuReference ref = cpu_reference(c, p, batch);
    vla::gpu::train::GpuModel one(c, p);
    const auto r1 = one.forward_backward(batch);
    const Params<float> g1 = one.grads();
    vla::gpu::train::DataParallelModel dp(c, p, 2);
    const auto r2 = dp.forward_backward(batch);
    const Params<float> g2 = dp.grads(0), g2b = dp.grads(1);
    INFO(mixer);
    const double el_cpu = std::abs(ref.loss32 - ref.loss64) / ref.loss64, el_dp = std::abs(r2.loss - ref.loss64) / ref.loss64;
    CHECK(el_dp <= CpuReference::bound(el_cpu));
    CHECK(r2.targets == r1.targets);
    CHECK(std::abs(r2.accuracy - r1.accuracy) <= 1.0 / r1.targets);  // an argmax tie may flip one position
    REQUIRE(r2.S_fro.size() == r1.S_fro.size());
    for (std::size_t l = 0; l < r1.S_fro.size(); ++l) {
      CHECK(std::isnan(r2.S_fro[l]) == std::isnan(r1.S_fro[l]));
      if (!std::isnan(r1.S_fro[l])) CHECK(std::abs(r2.S_fro[l] - r1.S_fro[l]) <= 1e-5 * r1.S_fro[l]);
    }
    double worst_dp = 0, worst_one = 0;  // error / its bound (at most 1)
    for (std::size_t i = 0; i < g2.t.size(); ++i) {
      if (g2.t[i].size() == 0) continue;
      const double ec = rel_err(ref.g32.t[i], ref.g64.t[i]), e1 = rel_err(g1.t[i], ref.g64.t[i]), e2 = rel_err(g2.t[i], ref.g64.t[i]);
      INFO(g2.names[i] << ": cpu-float " << ec << ", one gpu " << e1 << ", two gpus " << e2);
      CHECK(std::isfinite(e2));
      CHECK(e2 <= CpuReference::bound(ec));
      CHECK(g2.t[i] == g2b.t[i]);
      worst_dp = std::max(worst_dp, e2 / CpuReference::bound(ec));
      worst_one = std::max(worst_one, e1 / CpuReference::bound(ec));
    }
    WARN(mixer << ": worst tensor error vs float64 / its bound max(10 cpu-float error, 64 u) (at most 1): one GPU " << worst_one << ", two GPUs "
               << worst_dp << "; loss rel err " << el_dp);
  }
}

// Loss-curve parity with one GPU, same seed, 200 steps, with the bounds the one-GPU curve meets against
// the CPU (test_gpu_train.cpp, for the same reason: step 1 differs by forward rounding only, later steps
// by the rounding of every update, which Adam can amplify up to lr per component). And the replicas stay
// equal bit for bit after every step: each applies the same update to the same parameters, so a
// difference means a replica missed the all-reduce or the update.
TEST_CASE("data-parallel training over 2 GPUs follows the one-GPU loss curve and keeps its replicas equal", "[gpu][gpu-dp][train-curve]") {
  if (!two_gpus()) { WARN("fewer than 2 CUDA devices visible: the data-parallel test is skipped"); return; }
  for (const std::string mixer : {"vla", "deltanet", "softmax"}) {
    auto tc = small_run(mixer, 200, 16, 11);
    tc.checkpoint_every = 1000;
    tc.opt.lr = 3e-3;
    const auto one = vla::gpu::train::train_gpu(tc, {});
    const auto two = vla::train::train(tc, {}, vla::train::RunOptions{}, vla::gpu::train::cuda_data_parallel_device(2));
    REQUIRE(one.losses.size() == 200);
    REQUIRE(two.losses.size() == 200);
    const CurveGap g = curve_gap(one.losses, two.losses);
    WARN(mixer << ": step-1 rel diff " << g.step1 << ", steps 2-10 max " << g.early << ", last-20 mean one GPU " << g.mean_ref << " two "
               << g.mean_other << ", ms/step one " << one.step_ms << " two " << two.step_ms);
    CHECK(g.step1 <= 1e-5);
    CHECK(g.early <= 1e-3);
    CHECK(std::abs(g.mean_other - g.mean_ref) / g.mean_ref <= 0.03);
    CHECK(g.mean_ref < 0.9 * one.losses[0]);
  }
  // Replicas after 20 steps of their own loop.
  const auto tc = small_run("vla", 20, 9, 4);
  vla::gpu::train::DataParallelModel dp(tc.model, vla::model::init_params<float>(tc.model, tc.seed), 2);
  for (int s = 0; s < 20; ++s) {
    dp.forward_backward(vla::train::make_batch(tc.task, tc.batch, vla::train::batch_seed(tc.seed, s)));
    dp.adamw_step(tc.opt, 3e-3, 1.0);
  }
  dp.synchronize();
  const auto a = dp.params(0), b = dp.params(1);
  for (std::size_t i = 0; i < a.t.size(); ++i) CHECK(a.t[i] == b.t[i]);
}

// Determinism and resume: the same 2-GPU run twice gives the same bits (losses, log); a 2-GPU run
// stopped after 5 of 8 steps and resumed equals the uninterrupted one bit for bit, its checkpoint
// records "cuda:2", and one GPU refuses to continue it naming --device (the sums would be another
// order: not the run the checkpoint came from).
TEST_CASE("a 2-GPU run is deterministic and resumes to the uninterrupted run bit for bit", "[gpu][gpu-dp][gpu-resume]") {
  if (!two_gpus()) { WARN("fewer than 2 CUDA devices visible: the data-parallel test is skipped"); return; }
  const auto dev = vla::gpu::train::cuda_data_parallel_device(2);
  auto tc = small_run("vla", 8, 8, 5);
  tc.eval_every = 3;
  tc.checkpoint_every = 2;
  const auto tmp = std::filesystem::temp_directory_path();
  const auto full_dir = tmp / "vla_gpu_dp_full", part_dir = tmp / "vla_gpu_dp_part";
  std::filesystem::remove_all(full_dir);
  std::filesystem::remove_all(part_dir);
  const auto full = vla::train::train(tc, full_dir, {}, dev);
  const auto again = vla::train::train(tc, {}, {}, dev);
  CHECK(again.losses == full.losses);
  CHECK(same_bits(again.log, full.log));
  vla::train::RunOptions stop;
  stop.stop_after = 5;
  const auto part = vla::train::train(tc, part_dir, stop, dev);
  CHECK(part.interrupted);
  CHECK(vla::train::checkpoint_device(part_dir) == "cuda:2");
  CHECK_THROWS_WITH(vla::gpu::train::resume_gpu(part_dir, {}), Catch::Contains("--device") && Catch::Contains("cuda:2"));
  check_same_run(vla::train::resume(part_dir, {}, dev), full, part_dir, full_dir);
  std::filesystem::remove_all(full_dir);
  std::filesystem::remove_all(part_dir);
}

#endif  // VLA_HAVE_NCCL
