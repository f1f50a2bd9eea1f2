// GPU training (gpu/train/) against the CPU training engine (core/model, core/train): the same weights
// and batch give the same loss and gradients (to what fp32 allows), and the same seed gives the same
// loss curve (tightly at first, loosely at the end) and the same S/A norms; a GPU run stopped and resumed
// is the uninterrupted GPU run bit for bit. [gpu] cases skip where no CUDA device is visible.
#include "core/train/trainer.hpp"
#include "gpu/device_query.hpp"
#include "gpu/train/model.hpp"
#include "gpu/train/trainer.hpp"
#include "tests/gpu/train_fixtures.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

using namespace vla::gpu::train::testing;

// Bad configurations are rejected before any device work (no GPU needed, so CI runs this): a wrong
// message or no exception would let `vla train --device cuda` crash or silently train another model.
TEST_CASE("GPU training rejects configurations it has no kernel for, naming the parameter", "[gpu-train]") {
  auto c = small_model("vla-v2");  // a CPU mixer without a GPU path
  CHECK_THROWS_WITH(vla::gpu::train::validate_gpu_config(c),
                    Catch::Contains("--mixer") && Catch::Contains("vla, vla-fixed-a, vla-no-knorm, linear, deltanet, softmax"));
  c = small_model("softmax");
  CHECK_NOTHROW(vla::gpu::train::validate_gpu_config(c));
  c.d_head = 48;  // softmax runs on cuBLAS, but only the tested head widths are accepted
  c.d_model = 96;
  CHECK_THROWS_WITH(vla::gpu::train::validate_gpu_config(c), Catch::Contains("--d-head"));
  c = small_model("vla");
  c.d_head = 48;  // no recurrent kernel at this width
  c.d_model = 96;
  CHECK_THROWS_WITH(vla::gpu::train::validate_gpu_config(c), Catch::Contains("--d-head") && Catch::Contains("16, 32, 64, 96, 128"));
  c = small_model("vla");
  CHECK_NOTHROW(vla::gpu::train::validate_gpu_config(c));
  c.mixer.penalty.policy = vla::DeltaPolicy::SkipAddEps;  // the kernels implement Algorithm 1's clamp only
  CHECK_THROWS_WITH(vla::gpu::train::validate_gpu_config(c), Catch::Contains("--delta-policy"));
  // Many runs are all checked before the first starts (and before the device is needed): one run the GPU
  // cannot do stops them all, naming the parameter.
  auto skip = small_run("vla", 2, 4, 0);
  skip.model.mixer.penalty.policy = vla::DeltaPolicy::SkipAddEps;
  CHECK_THROWS_WITH(vla::train::train_many({small_run("vla", 2, 4, 0), skip}, std::vector<std::filesystem::path>(2), {},
                                           vla::gpu::train::cuda_device()),
                    Catch::Contains("--delta-policy"));
}

// Gradient parity. Both the CPU float path and the GPU path are fp32 evaluations of the same
// function; they differ only in the order of their sums (cuBLAS tiling, block reductions vs Eigen's
// loops), and the worst-case rounding bound (gamma_n u per length-n sum, compounded through the
// layers and the T-step recurrence) is the same for any order. So the CPU float's MEASURED error
// against the double reference is the yardstick for what fp32 achieves on this exact computation:
// the GPU must stay within 10x of it (order-to-order variation of a random-walk rounding error is a
// small factor), with a floor of 64 u for tensors the CPU float happens to get almost exactly.
// A wrong layer, transposed weight or missing term gives an O(1) relative error and fails by orders
// of magnitude. Softmax attention (cuBLAS products + row kernels instead of a recurrence) is held to
// the same bound: it too differs from the CPU float path only in summation order. Its key bias has an
// exact gradient of 0 (it shifts all logits of a query equally), so there both fp32 paths hold rounding
// noise and the check says the GPU's noise is no larger than 10x the CPU's: a wrong term would be O(1)
// against the other gradients and far above that noise.
TEST_CASE("GPU batch gradient equals the CPU model's (loss and every parameter gradient)", "[gpu]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU training test is skipped"); return; }
  struct Case { std::string mixer; int d_head; int batch = 8; };
  // Table 4's ablations (vla-fixed-a runs on DeltaNet's kernel with VLA's parameters: W_u's gradient is
  // zero on both devices) and its wide heads (96: the forward's 4-part rows, 128: A's column in registers).
  // Batch 80 (1040 rows): the bias and LayerNorm gradients' column sums split their rows. Batch 3 (39 rows,
  // not a multiple of 4): every product runs on cuBLAS, the head-major tensors permuted around it (as
  // DeltaNet's gate logits, one per head, are at every batch).
  for (const auto& [mixer, d_head, nb] : {Case{"vla", 16}, Case{"linear", 16}, Case{"deltanet", 16}, Case{"softmax", 16},
                                          Case{"vla-fixed-a", 16}, Case{"vla-no-knorm", 16}, Case{"vla", 96}, Case{"vla", 128},
                                          Case{"vla", 16, 80}, Case{"vla", 16, 3}, Case{"deltanet", 16, 3}}) {
    ModelConfig c = small_model(mixer);
    c.d_head = d_head;
    const Params<float> p = vla::model::init_params<float>(c, 7);
    const auto batch = vla::train::make_batch(mqar(4), nb, vla::train::batch_seed(3, 0));  // (nb, 13)
    const CpuReference ref = cpu_reference(c, p, batch);
    vla::gpu::train::GpuModel gm(c, p);
    const auto rg = gm.forward_backward(batch);
    const Params<float> gg = gm.grads();
    const double el_cpu = std::abs(ref.loss32 - ref.loss64) / ref.loss64, el_gpu = std::abs(rg.loss - ref.loss64) / ref.loss64;
    WARN(mixer << " loss rel err: cpu-float " << el_cpu << ", gpu " << el_gpu);
    CHECK(el_gpu <= CpuReference::bound(el_cpu));
    CHECK(std::abs(rg.accuracy - ref.accuracy32) <= 1.0 / rg.targets);  // an argmax tie may flip one position
    double worst = 0;
    std::string worst_name;
    for (std::size_t i = 0; i < gg.t.size(); ++i) {
      if (gg.t[i].size() == 0) continue;
      const double ec = rel_err(ref.g32.t[i], ref.g64.t[i]), eg = rel_err(gg.t[i], ref.g64.t[i]);
      INFO(mixer << " d_head " << d_head << " batch " << nb << " " << gg.names[i] << ": cpu-float " << ec << ", gpu " << eg);
      CHECK(std::isfinite(eg));
      CHECK(eg <= CpuReference::bound(ec));
      if (eg / CpuReference::bound(ec) > worst) { worst = eg / CpuReference::bound(ec); worst_name = gg.names[i] + " " + std::to_string(eg); }
    }
    WARN(mixer << " d_head " << d_head << " batch " << nb << " worst gradient tensor (gpu err / its bound max(10 cpu err, 64 u), at most 1) = " << worst << " at " << worst_name);
  }
}

// The chunked pair (chunked_vla_forward + chunked_vla_backward, `--recurrent-form chunked`) in the same
// parity check: the same function as the fused pair, so the same bound against the CPU's double; its
// state norms are NaN (it computes none), which also shows that it, not the fused pair, ran. Asked for
// where it cannot run (another mixer or width), the model refuses, naming --recurrent-form.
TEST_CASE("GPU batch gradient through the chunked VLA pair equals the CPU model's", "[gpu]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU training test is skipped"); return; }
  using vla::gpu::RecurrentForm;
  ModelConfig c = small_model("vla");
  c.d_head = 32;
  const Params<float> p = vla::model::init_params<float>(c, 7);
  for (int pairs : {4, 20}) {  // T = 13 (one chunk) and 61 (chunks of 20, 20, 20, 1, each a backward group at this size)
    const auto batch = vla::train::make_batch(mqar(pairs), 8, vla::train::batch_seed(3, 0));
    const CpuReference ref = cpu_reference(c, p, batch);
    vla::gpu::train::GpuModel gm(c, p, nullptr, RecurrentForm::Chunked);
    const auto rg = gm.forward_backward(batch);
    const Params<float> gg = gm.grads();
    const double el_cpu = std::abs(ref.loss32 - ref.loss64) / ref.loss64, el_gpu = std::abs(rg.loss - ref.loss64) / ref.loss64;
    WARN("chunked pair, MQAR n = " << pairs << ": loss rel err cpu-float " << el_cpu << ", gpu " << el_gpu);
    CHECK(el_gpu <= CpuReference::bound(el_cpu));
    for (std::size_t i = 0; i < gg.t.size(); ++i) {
      if (gg.t[i].size() == 0) continue;
      const double ec = rel_err(ref.g32.t[i], ref.g64.t[i]), eg = rel_err(gg.t[i], ref.g64.t[i]);
      INFO("chunked pair, n = " << pairs << " " << gg.names[i] << ": cpu-float " << ec << ", gpu " << eg);
      CHECK(std::isfinite(eg));
      CHECK(eg <= CpuReference::bound(ec));
    }
    REQUIRE(rg.S_fro.size() == std::size_t(c.layers));
    for (double s : rg.S_fro) CHECK(std::isnan(s));
    vla::gpu::train::GpuModel fused(c, p, nullptr, RecurrentForm::Fused);
    for (double s : fused.forward_backward(batch).S_fro) CHECK(std::isfinite(s));
  }
  c.d_head = 16;  // no chunked kernel at this width
  CHECK_THROWS_WITH(vla::gpu::train::GpuModel(c, p, nullptr, RecurrentForm::Chunked), Catch::Contains("--recurrent-form"));
  c = small_model("deltanet");
  CHECK_THROWS_WITH(vla::gpu::train::GpuModel(c, vla::model::init_params<float>(c, 7), nullptr, RecurrentForm::Chunked),
                    Catch::Contains("--recurrent-form"));
}

// Loss-curve parity, same seed, 200 steps. Step 1 is the same weights and batch, so the losses agree
// to fp32 forward rounding (bound 1e-5 relative, ~170 u: sums of length <= 128 over 2 blocks and 13
// recurrent steps). Afterwards the two trajectories differ by the rounding of every update (Adam
// normalises each component, so a near-zero gradient component can move by up to lr), and that
// difference grows; early steps stay within 1e-3 relative, and at the end the two runs must reach
// the same loss level: the mean of the last 20 losses within 3% (both runs are still descending; a
// broken GPU update rule, schedule or clip would leave it tens of percent off).
TEST_CASE("GPU training follows the CPU loss curve for the same seed", "[gpu][train-curve]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU training test is skipped"); return; }
  for (const std::string mixer : {"vla", "deltanet", "softmax"}) {
    auto tc = small_run(mixer, 200, 16, 11);
    tc.checkpoint_every = 1000;
    tc.opt.lr = 3e-3;  // a small model learns in 200 steps only with a larger step; same on both devices
    const auto dir = std::filesystem::temp_directory_path() / ("vla_gpu_parity_" + mixer);
    std::filesystem::remove_all(dir);
    vla::train::RunOptions ro;
    const auto cpu = vla::train::train(tc, dir, ro);
    const auto gpu = vla::gpu::train::train_gpu(tc, {});
    std::filesystem::remove_all(dir);
    REQUIRE(cpu.losses.size() == 200);
    REQUIRE(gpu.losses.size() == 200);
    const CurveGap g = curve_gap(cpu.losses, gpu.losses);
    WARN(mixer << ": step-1 rel diff " << g.step1 << ", steps 2-10 max " << g.early << ", last-20 mean cpu " << g.mean_ref << " gpu "
               << g.mean_other << " (first loss " << cpu.losses[0] << "), gpu " << gpu.step_ms << " ms/step");
    CHECK(g.step1 <= 1e-5);
    CHECK(g.early <= 1e-3);
    CHECK(std::abs(g.mean_other - g.mean_ref) / g.mean_ref <= 0.03);
    CHECK(g.mean_ref < 0.9 * cpu.losses[0]);  // the comparison means something only if the model learned  // the comparison means something only if the model learned
  }
}

// Runs sharing one GPU (train_many on cuda_device(): one thread and stream per run) compute exactly what each
// computes alone: every kernel is deterministic (no atomics), each run has its own buffers and cuBLAS
// handle. A difference in any bit means runs interfere (a shared buffer, a missing stream ordering).
TEST_CASE("concurrent GPU runs equal the same runs alone bit for bit", "[gpu][train-curve]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU training test is skipped"); return; }
  std::vector<vla::train::TrainConfig> cfgs;
  for (const std::string mixer : {"vla", "deltanet", "linear", "vla"}) {
    cfgs.push_back(small_run(mixer, 30, 16, 20 + cfgs.size()));
  }
  const auto many = vla::train::train_many(cfgs, std::vector<std::filesystem::path>(cfgs.size()), {}, vla::gpu::train::cuda_device());
  for (std::size_t i = 0; i < cfgs.size(); ++i) {
    const auto alone = vla::gpu::train::train_gpu(cfgs[i], {});
    INFO("run " << i);
    CHECK(alone.losses == many[i].losses);
    CHECK(alone.eval_accuracy == many[i].eval_accuracy);
  }
}

// Checkpoint/resume on the GPU: a run stopped after 5 of 8 steps (as SIGINT or --stop-after stop it) and
// resumed equals the uninterrupted run bit for bit: every loss, every log row (loss, accuracy, lr, grad
// norm, eval, S/A norms; log.csv byte for byte) and the final parameters. The GPU step is deterministic
// (no atomics), so any difference means state the checkpoint misses or restores wrongly: the Adam
// moments or their step count (bias corrections), the parameters' layout on the device, the data
// position. The checkpoint records "cuda", and the CPU refuses to continue it naming --device.
TEST_CASE("a GPU run stopped and resumed equals the uninterrupted GPU run bit for bit", "[gpu][gpu-resume][train-curve]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU training test is skipped"); return; }
  for (const std::string mixer : {"vla", "deltanet", "softmax"}) {
    auto tc = small_run(mixer, 8, 8, 5);
    tc.eval_every = 3;
    tc.checkpoint_every = 2;
    const auto tmp = std::filesystem::temp_directory_path();
    const auto full_dir = tmp / ("vla_gpu_resume_full_" + mixer), part_dir = tmp / ("vla_gpu_resume_part_" + mixer);
    std::filesystem::remove_all(full_dir);
    std::filesystem::remove_all(part_dir);
    const auto full = vla::gpu::train::train_gpu(tc, full_dir, vla::train::RunOptions{});
    vla::train::RunOptions stop;
    stop.stop_after = 5;
    const auto part = vla::gpu::train::train_gpu(tc, part_dir, stop);
    INFO(mixer);
    CHECK(part.interrupted);
    CHECK(part.steps_done == 5);
    CHECK(vla::train::checkpoint_device(part_dir) == "cuda");
    CHECK_THROWS_WITH(vla::train::resume(part_dir, {}), Catch::Contains("--device") && Catch::Contains("cuda"));
    check_same_run(vla::gpu::train::resume_gpu(part_dir, {}), full, part_dir, full_dir);
    std::filesystem::remove_all(full_dir);
    std::filesystem::remove_all(part_dir);
  }
}

// The GPU log's S/A columns (batch mean over sequences of the head mean of ||S_T||_F, ||A_T||_F at the
// last token, from the fused forward's stats) against the CPU run's for the same seed, with the bounds
// the loss-curve test uses for the loss, for the same reason: at step 1 the weights and batch are the
// same, and ||S_T||, ||A_T|| are forward quantities (sums of the same lengths as the loss's, in another
// order), so they agree to fp32 forward rounding, 1e-5 relative; at steps 2..10 the weights differ by
// the rounding of the updates, as for the loss, 1e-3. Where the CPU logs NaN (softmax: no state;
// linear and deltanet: no A) the GPU must too. A wrong step (S_{T-1}), a head sum instead of a mean, a
// sum over the batch instead of a mean, or the wrong layer's stats is off by O(1).
TEST_CASE("the GPU log's S/A norms equal the CPU run's for the same seed", "[gpu][gpu-resume][train-curve]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU training test is skipped"); return; }
  for (const std::string mixer : {"vla", "linear", "deltanet", "softmax", "vla-fixed-a"}) {
    auto tc = small_run(mixer, 10, 16, 11);
    tc.opt.lr = 3e-3;  // as the loss-curve test: the weights move visibly in 10 steps
    const auto cpu = vla::train::train(tc, {}, vla::train::RunOptions{});
    const auto gpu = vla::gpu::train::train_gpu(tc, {});
    REQUIRE(cpu.log.size() == 10);
    REQUIRE(gpu.log.size() == 10);
    double first = 0, later = 0;
    for (int s = 0; s < 10; ++s)
      for (int l = 0; l < tc.model.layers; ++l)
        for (int k : {6 + 2 * l, 7 + 2 * l}) {  // S_fro_l, A_fro_l
          const double c = cpu.log[s][k], g = gpu.log[s][k];
          INFO(mixer << " step " << s + 1 << " column " << k << ": cpu " << c << ", gpu " << g);
          REQUIRE(std::isnan(c) == std::isnan(g));
          if (std::isnan(c)) continue;
          CHECK(c > 0);
          const double rel = std::abs(g - c) / c;
          (s == 0 ? first : later) = std::max(s == 0 ? first : later, rel);
        }
    WARN(mixer << " S/A norms: step-1 max rel diff " << first << ", steps 2-10 max " << later << "; layer-0 step-1 S "
               << cpu.log[0][6] << " A " << cpu.log[0][7]);
    CHECK(first <= 1e-5);
    CHECK(later <= 1e-3);
  }
}
