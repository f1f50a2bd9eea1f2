// The rules' GPU traits (core/rules/<rule>/gpu.hpp) and the one check of the GPU's limits
// (core/rules/gpu_support.hpp): which mixer runs on which CUDA path, the kernel parameters each rule
// derives from its options, and the errors naming the flag. No device needed: the trait is plain C++.
#include "core/rules/gpu_support.hpp"

#include <catch2/catch.hpp>

using namespace vla;

static MixerConfig named(const std::string& m) { MixerConfig c; c.mixer = m; return c; }

TEST_CASE("GPU trait: each mixer's CUDA path", "[gpu-trait]") {
  // Algorithm 1 (with or without key normalisation) and the two baselines have a fused recurrent kernel,
  // softmax the softmax path, VLA with A fixed DeltaNet's kernel ungated (core/rules/vla/gpu.hpp says why
  // that is the same recurrence), the other VLA variants none. A failure means a mixer would run on a
  // kernel computing another recurrence.
  CHECK(gpu_kernel_of(named("vla")).path == GpuPath::Recurrent);
  CHECK(gpu_kernel_of(named("vla")).kind == gpu::RecurrentKind::Vla);
  CHECK(gpu_kernel_of(named("vla")).params.normalise_key);
  CHECK(gpu_kernel_of(named("vla-no-knorm")).kind == gpu::RecurrentKind::Vla);
  CHECK_FALSE(gpu_kernel_of(named("vla-no-knorm")).params.normalise_key);
  const GpuKernel fixed = gpu_kernel_of(named("vla-fixed-a"));
  CHECK(fixed.path == GpuPath::Recurrent);
  CHECK(fixed.kind == gpu::RecurrentKind::DeltaNet);
  CHECK_FALSE(fixed.gated);
  CHECK(fixed.constant_A == Approx(10.0));  // A_0 = I / lambda0, lambda0 = 0.1
  CHECK(gpu_kernel_of(named("vla")).constant_A == 0.0);
  CHECK(gpu_kernel_of(named("linear")).kind == gpu::RecurrentKind::Linear);
  CHECK(gpu_kernel_of(named("deltanet")).kind == gpu::RecurrentKind::DeltaNet);
  CHECK(gpu_kernel_of(named("softmax")).path == GpuPath::Softmax);
  for (const char* m : {"vla-v2", "vla-rls"}) {
    INFO(m);
    CHECK(gpu_kernel_of(named(m)).path == GpuPath::None);
  }
  CHECK(gpu_mixer_names(GpuUse::Training) == "vla, vla-fixed-a, vla-no-knorm, linear, deltanet, softmax");
  CHECK(gpu_mixer_names(GpuUse::LayerForward) == "vla, vla-fixed-a, vla-no-knorm, linear, deltanet");
  // Analysis-only configurations of the rules have no kernel either.
  LinearAttentionOptions normalised;
  normalised.normalise_key = true;
  CHECK(gpu_kernel(LinearAttentionRule<Precision<float>>(normalised)).path == GpuPath::None);
  VlaOptions key = VlaOptions::preset("vla");
  key.penalty_source = PenaltySource::Key;
  CHECK(gpu_kernel(VlaRule<Precision<float>>(key)).path == GpuPath::None);
  VlaOptions fixed_raw = VlaOptions::preset("vla-fixed-a");
  fixed_raw.normalise_key = false;  // alpha_hat = unit(phi(k)) differs from the write key phi(k): not DeltaNet
  CHECK(gpu_kernel(VlaRule<Precision<float>>(fixed_raw)).path == GpuPath::None);
}

TEST_CASE("GPU trait: kernel parameters come from the rule's options", "[gpu-trait]") {
  MixerConfig c = named("vla");
  c.penalty.eps = 2e-3;
  c.penalty.lambda0 = 0.5;
  c.penalty.refresh_period = 7;
  c.penalty.refresh_eta = 4e-3;
  const gpu::RecurrentParams p = gpu_kernel_for(c, 32, GpuUse::Training).params;
  CHECK(p.eps == 2e-3f);
  CHECK(p.lambda0 == 0.5f);
  CHECK(p.refresh_period == 7);
  CHECK(p.refresh_eta == 4e-3f);
  c.mixer = "deltanet";
  CHECK(gpu_kernel_for(c, 32, GpuUse::LayerForward).params.eps == 2e-3f);
  CHECK(gpu_kernel_of(c).gated);
  c.deltanet_gated = false;
  CHECK_FALSE(gpu_kernel_of(c).gated);
  // The defaults are the kernels' own (Algorithm 1's), so a default-built launch matches the rule.
  const gpu::RecurrentParams d = gpu_kernel_of(named("vla")).params, k{};
  CHECK(d.eps == k.eps);
  CHECK(d.lambda0 == k.lambda0);
  CHECK(d.refresh_period == k.refresh_period);
  CHECK(d.refresh_eta == k.refresh_eta);
}

TEST_CASE("GPU limits are refused naming the flag and what is allowed", "[gpu-trait]") {
  CHECK_THROWS_WITH(gpu_kernel_for(named("vla-v2"), 32, GpuUse::Training),
                    Catch::Contains("--mixer") && Catch::Contains("vla, vla-fixed-a, vla-no-knorm, linear, deltanet, softmax"));
  CHECK_THROWS_WITH(gpu_kernel_for(named("softmax"), 32, GpuUse::LayerForward),
                    Catch::Contains("--mixer") && Catch::Contains("vla, vla-fixed-a, vla-no-knorm, linear, deltanet"));
  CHECK_THROWS_WITH(gpu_kernel_for(named("vla"), 48, GpuUse::Training),
                    Catch::Contains("--d-head") && Catch::Contains("16, 32, 64, 96, 128"));
  CHECK_NOTHROW(gpu_kernel_for(named("vla"), 96, GpuUse::Training));
  CHECK_NOTHROW(gpu_kernel_for(named("vla-no-knorm"), 128, GpuUse::Training));
  CHECK_NOTHROW(gpu_kernel_for(named("softmax"), 128, GpuUse::Training));
  CHECK_THROWS_WITH(gpu_kernel_for(named("softmax"), 96, GpuUse::Training), Catch::Contains("--d-head") && Catch::Contains("16, 32, 64, 128"));
  CHECK_THROWS_WITH(gpu_kernel_for(named("linear"), 24, GpuUse::LayerForward),
                    Catch::Contains("--d-head") && Catch::Contains("16, 32, 64, 96, 128"));
  MixerConfig c = named("vla");
  c.penalty.rank = 2;
  CHECK_THROWS_WITH(gpu_kernel_for(c, 32, GpuUse::LayerForward), Catch::Contains("--rank"));
  c = named("vla");
  c.penalty.policy = DeltaPolicy::SkipAddEps;
  CHECK_THROWS_WITH(gpu_kernel_for(c, 32, GpuUse::LayerForward), Catch::Contains("--delta-policy") && Catch::Contains("clamp"));
  c = named("linear");
  c.renormalise_S = true;
  c.renorm_threshold = 10.0;
  CHECK_THROWS_WITH(gpu_kernel_for(c, 32, GpuUse::LayerForward), Catch::Contains("--renormalise"));
}

TEST_CASE("gpu_unsupported answers exactly where gpu_kernel_for throws, with the same message", "[gpu-trait]") {
  // The planner (`vla study plan`) asks gpu_unsupported; the commands call gpu_kernel_for. If they
  // disagreed, the plan would send a run to a GPU that then refuses it, or keep one on the CPU.
  for (const std::string m : {"vla", "vla-v2", "vla-fixed-a", "vla-no-knorm", "linear", "deltanet", "softmax", "retnet", "mamba2", "delta"})
    for (int d : {16, 24, 32, 64, 96, 128})
      for (GpuUse use : {GpuUse::Training, GpuUse::LayerForward}) {
        INFO(m << " d_head " << d << (use == GpuUse::Training ? " training" : " layer forward"));
        const auto why = gpu_unsupported(named(m), d, use);
        if (why) {
          CHECK_THROWS_WITH(gpu_kernel_for(named(m), d, use), *why);
        } else {
          CHECK_NOTHROW(gpu_kernel_for(named(m), d, use));
        }
      }
}
