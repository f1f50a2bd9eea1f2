// Development driver of the chunked VLA forward (gpu/chunked_vla_forward.cu): Algorithm 1 written out in
// double on the host (gpu/dev/algorithm1_reference.hpp), the check of the chunked kernel and of the fused
// recurrent kernel against it on fresh random inputs (several shapes, chunk lengths, refresh on and off, T
// not a multiple of the chunk), and the benchmark of both in one run (CUDA events, median of the
// repetitions after a warm-up).
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -I. gpu/dev/chunked_vla_forward_check.cu gpu/chunked_vla_forward.cu \
//        gpu/recurrent_forward.cu -o cvla_check && ./cvla_check [reps] [all|check|quick|ab|tf32|digest|profile [T [G]]|parts T [G]|groups T G,...]
// (check: the checks without the benchmark; quick: two small checks, for compute-sanitizer's racecheck;
// ab: one line of the launch's own group at the benchmark's shapes, for gpu/dev/chunked-vla-ab.sh;
// tf32: the one-pass TF32 products' error against the double reference, then their times beside full's;
// digest: a hash of the outputs' bits at the benchmark's shapes, equal across builds that compute the same numbers;
// with CVLA_PRODUCTS=tf32 in the environment every other mode runs the one-pass products too; with
// CVLA_WORKSPACE=launch the chunked forward allocates its own workspace at every launch; with
// CVLA_WORKSPACE=pool too, from a default pool whose release threshold is raised so that it keeps that memory)
//
// Exit status 1 when a kernel misses the fp32 bound of the GPU tests (T d 2^-24, normwise) or writes a
// non-finite output. The project's own GPU test (tests/gpu/test_chunked_vla_forward.cpp) holds the kernel
// to the toolkit's CPU rule instead; this file is the kernel's bench and a reference independent of core/.
#include "gpu/chunked_vla_forward.hpp"
#include "gpu/dev/algorithm1_reference.hpp"
#include "gpu/dev/driver_support.hpp"
#include "gpu/recurrent_forward.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

using vla::gpu::RecurrentParams;
using vla::gpu::RecurrentTensors;

using vla::gpu::dev::algorithm1;
using vla::gpu::dev::Dev;

// Device inputs (B, H, T, 32) filled on the device (fill_random: uniform, unit variance) and an output.
struct RandomTensors {
  std::size_t N;
  Dev q, k, v, u, o;
  RecurrentTensors x;
  RandomTensors(int B, int H, int T, unsigned long long seed)
      : N(std::size_t(B) * H * T * 32), q(N), k(N), v(N), u(N), o(N) {
    unsigned long long sd = seed;
    for (Dev* t : {&q, &k, &v, &u}) CUDA_OK(vla::gpu::fill_random(t->p, (long long)N, sd++));
    x.q = q.p; x.k = k.p; x.v = v.p; x.u = u.p; x.o = o.p;
    x.B = B; x.H = H; x.T = T; x.d = 32;
  }
};

// How the chunked forward's products read their operands: full (3xTF32) unless the `tf32` mode says one pass.
vla::ProductOperands g_products = vla::ProductOperands::Full;

// Where the chunked forward's workspace comes from: the caller's, kept across launches (as training and the
// benchmark keep theirs), unless CVLA_WORKSPACE=launch asks for the launch's own stream-ordered allocation,
// which the default pool gives back at every synchronisation and maps again at the next launch, or
// CVLA_WORKSPACE=pool, the same allocation from a default pool whose release threshold is raised to keep it.
bool g_launch_workspace = false;

// 0: fused recurrent kernel; C > 0: the chunked forward at chunk C, `group` segments per group (0: default).
// The caller's workspace grows to the largest launch so far (in a benchmark's warm-up runs, never a timed one).
cudaError_t launch(int chunk, const RecurrentTensors& x, const RecurrentParams& p, int group = 0) {
  if (chunk == 0) return vla::gpu::recurrent_forward(vla::gpu::RecurrentKind::Vla, x, p);
  if (g_launch_workspace) return vla::gpu::chunked_vla_forward(x, p, chunk, group, nullptr, nullptr, g_products);
  static std::unique_ptr<Dev> ws;
  static std::size_t have = 0;
  const std::size_t need = vla::gpu::chunked_vla_forward_workspace_floats(x.B, x.H, x.T, chunk, group, p, x.checkpoints != nullptr);
  if (need > have) {
    ws.reset();
    ws = std::make_unique<Dev>(need);
    have = need;
  }
  return vla::gpu::chunked_vla_forward(x, p, chunk, group, nullptr, nullptr, g_products, ws->p, have);
}

// Bound: T d 2^-24 (normwise), the GPU tests' fp32 bound. With one-pass TF32 products the error is measured
// and printed, not judged here: tests/gpu/test_chunked_vla_forward.cpp holds it to the CPU emulation of that
// pass.
bool check(int B, int H, int T, int chunk, int period, std::uint64_t seed, int group = 0) {
  const int d = 32;
  const std::size_t N = std::size_t(B) * H * T * d;
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> q(N), k(N), v(N), u(N), ref(N), got(N);
  for (auto* x : {&q, &k, &v, &u}) for (float& e : *x) e = nd(gen);
  RecurrentParams p;
  p.refresh_period = period;
  for (int s = 0; s < B * H; ++s) {
    const std::size_t o = std::size_t(s) * T * d;
    algorithm1(&q[o], &k[o], &v[o], &u[o], &ref[o], T, d, p);
  }
  Dev dq(N), dk(N), dv(N), du(N), dout(N);
  CUDA_OK(cudaMemcpy(dq.p, q.data(), N * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dk.p, k.data(), N * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dv.p, v.data(), N * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(du.p, u.data(), N * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dout.p, 0xff, N * 4));  // NaN everywhere: an output never written fails
  RecurrentTensors x;
  x.q = dq.p; x.k = dk.p; x.v = dv.p; x.u = du.p; x.o = dout.p;
  x.B = B; x.H = H; x.T = T; x.d = d;
  CUDA_OK(launch(chunk, x, p, group));
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(got.data(), dout.p, N * 4, cudaMemcpyDeviceToHost));
  double num = 0, den = 0, worst_row = 0;
  bool finite = true;
  for (std::size_t r = 0; r < N / d; ++r) {
    double rn = 0, rd = 0;
    for (int i = 0; i < d; ++i) {
      const double g = got[r * d + i], f = ref[r * d + i];
      finite = finite && std::isfinite(g);
      rn += (g - f) * (g - f);
      rd += f * f;
    }
    num += rn;
    den += rd;
    worst_row = std::max(worst_row, std::sqrt(rn / rd));
  }
  const double err = std::sqrt(num / den), bound = double(T) * d * std::ldexp(1.0, -24);
  const bool tf32 = chunk != 0 && g_products == vla::ProductOperands::Tf32;
  const bool ok = finite && (tf32 || err <= bound);
  char judged[48];
  std::snprintf(judged, sizeof judged, "(bound %.1e)", bound);
  std::printf("check %-8s group %-3d B=%d H=%d T=%-5d refresh=%-2d  rel err %.3e  worst row %.3e  %s  %s\n",
              chunk == 0 ? "fused" : ("C=" + std::to_string(vla::gpu::chunked_vla_chunk(chunk, p))).c_str(), group, B, H, T,
              period, err, worst_row, tf32 ? "(tf32 products: measured)" : judged, ok ? "ok" : "FAIL");
  return ok;
}

double time_ms(int chunk, const RecurrentTensors& x, const RecurrentParams& p, int reps, int group = 0) {
  return vla::gpu::dev::median_ms(reps, [&] { return launch(chunk, x, p, group); });
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 10;
  const std::string mode = argc > 2 ? argv[2] : "all";
  // CVLA_PRODUCTS=full|tf32 (the knob's names, core/product_operands.hpp): the chunked forward's products in
  // every mode below.
  if (const char* e = std::getenv("CVLA_PRODUCTS")) {
    bool known = false;
    for (const auto& [name, value] : vla::knob_values(vla::ProductOperands{}))
      if (name == e) g_products = value, known = true;
    if (!known) {
      std::fprintf(stderr, "CVLA_PRODUCTS: unknown value '%s' (allowed: full, tf32)\n", e);
      return 2;
    }
  }
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  if (const char* e = std::getenv("CVLA_WORKSPACE")) {
    const std::string w = e;
    if (w != "launch" && w != "caller" && w != "pool") {
      std::fprintf(stderr, "CVLA_WORKSPACE: unknown value '%s' (allowed: caller, launch, pool)\n", e);
      return 2;
    }
    g_launch_workspace = w != "caller";
    if (w == "pool") {  // the caller's alternative to a workspace of its own (gpu/chunked_vla_forward.hpp)
      cudaMemPool_t pool;
      CUDA_OK(cudaDeviceGetDefaultMemPool(&pool, 0));
      std::uint64_t keep = UINT64_MAX;
      CUDA_OK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    }
  }
  std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);

  bool ok = true;
  if (mode == "profile") {  // `reps` launches at the benchmark's shape (T: argument 3, default 4096; group: argument 4)
    const RandomTensors in(8, 4, argc > 3 ? std::atoi(argv[3]) : 4096, 7);
    for (int i = 0; i < reps; ++i) CUDA_OK(launch(20, in.x, RecurrentParams{}, argc > 4 ? std::atoi(argv[4]) : 0));
    CUDA_OK(cudaDeviceSynchronize());
    return 0;
  }
  if (mode == "parts") {  // parts T [G]: the parts a forward at (8, 4, T, 32), refresh 20, C = 20 runs in (chunked_vla_parts)
    std::printf("parts %d\n", vla::gpu::chunked_vla_parts(20, argc > 4 ? std::atoi(argv[4]) : 0, RecurrentParams{}, 32,
                                                         argc > 3 ? std::atoi(argv[3]) : 4096));
    return 0;
  }
  if (mode == "ab") {  // the launch's own group at the benchmark's shapes only: one line, for A/B rounds
    std::printf("ab ms (T/refresh/C):");
    for (int T : {4096, 16384, 65536}) {
      const RandomTensors in(8, 4, T, 1);
      for (const auto [period, chunk] : {std::pair{20, 20}, std::pair{0, 16}}) {
        RecurrentParams p;
        p.refresh_period = period;
        std::printf("  %d/%d/%d %.3f", T, period, chunk, time_ms(chunk, in.x, p, reps));
      }
    }
    std::printf("\n");
    return 0;
  }
  if (mode == "tf32") {  // one-pass TF32 products: their error at the check shapes, then full / tf32 times in one run
    g_products = vla::ProductOperands::Tf32;
    for (int period : {20, 0})
      for (int chunk : {1, 16, 20, 32}) ok = check(2, 3, 1009, chunk, period, 11 + chunk + period) && ok;
    ok = check(1, 2, 16384, 20, 20, 6) && ok;
    std::printf("\nfull / tf32 products, (8, 4, T, 32), the launch's group, median of %d, ms\n", reps);
    for (int T : {4096, 16384, 65536}) {
      const RandomTensors in(8, 4, T, 1);
      for (const auto [period, chunk] : {std::pair{20, 20}, std::pair{0, 16}}) {
        RecurrentParams p;
        p.refresh_period = period;
        double ms[2][3];
        for (int round = 0; round < 3; ++round)  // alternated, so that clock drift hits both alike
          for (int m = 0; m < 2; ++m) {
            g_products = m == 0 ? vla::ProductOperands::Full : vla::ProductOperands::Tf32;
            ms[m][round] = time_ms(chunk, in.x, p, reps);
          }
        std::sort(ms[0], ms[0] + 3);
        std::sort(ms[1], ms[1] + 3);
        std::printf("T %-6d refresh %-2d C %-2d  full %.3f  tf32 %.3f  full/tf32 %.2f\n", T, period, chunk, ms[0][1], ms[1][1],
                    ms[0][1] / ms[1][1]);
      }
    }
    std::printf("%s\n", ok ? "all outputs finite" : "SOME OUTPUTS NOT FINITE");
    return ok ? 0 : 1;
  }
  if (mode == "digest") {  // FNV-1a over the outputs' bits at the benchmark's shape, the launch's group and a few
                           // given ones: builds that should compute the same numbers must print alike
    for (const auto [T, group] : {std::pair{4096, 0}, std::pair{16384, 0}, std::pair{16384, 13}, std::pair{65536, 0}, std::pair{65536, 26}}) {
      const RandomTensors in(8, 4, T, 3);
      RecurrentParams p;
      p.refresh_period = 20;
      CUDA_OK(cudaMemset(in.o.p, 0xff, in.N * 4));
      CUDA_OK(launch(20, in.x, p, group));
      CUDA_OK(cudaDeviceSynchronize());
      bool finite = true;
      const std::uint64_t h = vla::gpu::dev::fnv1a_bits(vla::gpu::dev::kFnvOffset, in.o.p, in.N, finite);
      std::printf("digest T=%-5d group %-2d %016llx%s\n", T, group, static_cast<unsigned long long>(h), finite ? "" : "  NOT FINITE");
      ok = finite && ok;
    }
    return ok ? 0 : 1;
  }
  if (mode == "groups") {  // groups T G1,G2,...: the forward at (8, 4, T, 32), refresh 20, C = 20, at each group
    const int T = argc > 3 ? std::atoi(argv[3]) : 16384;
    const RandomTensors in(8, 4, T, 1);
    std::printf("T %d group (ms):", T);
    for (std::string list = argc > 4 ? argv[4] : "0"; !list.empty();) {
      const std::size_t comma = list.find(',');
      const int g = std::atoi(list.substr(0, comma).c_str());
      list = comma == std::string::npos ? "" : list.substr(comma + 1);
      std::printf("  %d %.3f", g, time_ms(20, in.x, RecurrentParams{}, reps, g));
    }
    std::printf("\n");
    return 0;
  }
  if (mode == "quick") {
    ok = check(1, 2, 45, 20, 20, 1) && ok;
    ok = check(1, 1, 37, 32, 0, 2) && ok;
    std::printf("%s\n", ok ? "all checks passed" : "SOME CHECKS FAILED");
    return ok ? 0 : 1;
  }
  // Shapes: T a multiple of no chunk (prime, and past a refresh boundary), several (b, h) sequences; group
  // lengths from one segment to more than the sequence.
  for (int period : {20, 0})
    for (int chunk : {0, 1, 7, 16, 20, 32})
      ok = check(2, 3, 1009, chunk, period, 11 + chunk + period) && ok;
  for (int group : {1, 3, 64}) ok = check(2, 3, 1009, 20, 20, 31 + group, group) && ok;
  ok = check(1, 1, 5, 32, 0, 3) && ok;      // one short chunk
  ok = check(4, 8, 4096, 0, 20, 5) && ok;   // the benchmark's T, fused
  ok = check(4, 8, 4096, 20, 20, 5) && ok;  // and chunked
  ok = check(1, 2, 16384, 20, 20, 6) && ok; // a long sequence: the penalty chain over many groups and spans
  if (mode == "check") {
    std::printf("%s\n", ok ? "all checks passed" : "SOME CHECKS FAILED");
    return ok ? 0 : 1;
  }

  // Benchmark: (B, H, d) = (8, 4, 32), the shape of the anchors (shared/reference/anchors-h100.md).
  const int B = 8, H = 4, d = 32;
  std::printf("\nbench (B, H, d) = (%d, %d, %d), median of %d, ms\n", B, H, d, reps);
  std::printf("%-7s | %-7s | %-4s | %-8s | %-11s | %-8s | %-8s | %-8s | %-8s | %-10s\n", "T", "refresh", "C", "fused", "auto (grp)", "group 8",
              "group 16", "group 32", "group 64", "fused/auto");
  for (int T : {4096, 16384, 65536}) {
    const RandomTensors in(B, H, T, 1);
    const RecurrentTensors& x = in.x;
    for (int period : {20, 0}) {
      RecurrentParams p;
      p.refresh_period = period;
      const double f = time_ms(0, x, p, reps);
      for (int chunk : period ? std::vector<int>{20} : std::vector<int>{16, 32}) {
        const double a = time_ms(chunk, x, p, reps, 0);
        double t[4];
        for (int i = 0; i < 4; ++i) t[i] = time_ms(chunk, x, p, reps, 8 << i);
        std::printf("%-7d | %-7d | %-4d | %-8.3f | %-6.3f (%2d) | %-8.3f | %-8.3f | %-8.3f | %-8.3f | %-10.2f\n", T, period, chunk, f, a,
                    vla::gpu::chunked_vla_group(chunk, 0, p, B * H, T), t[0], t[1], t[2], t[3], f / a);
      }
    }
  }
  // Other launch shapes: how many sequences the chunked form needs to pay (refresh on, C = 20, auto group).
  std::printf("\nby launch shape (d = 32, refresh 20, C = 20, the launch's group), median of %d, ms\n", reps);
  std::printf("%-4s | %-4s | %-7s | %-9s | %-12s | %-10s\n", "B", "H", "T", "fused", "chunked (grp)", "fused/chunked");
  for (const auto [b, h] : {std::pair{1, 1}, std::pair{1, 8}, std::pair{4, 8}, std::pair{16, 16}})
    for (int T : {1024, 4096, 16384}) {
      const RandomTensors in(b, h, T, 3);
      const RecurrentParams p;
      const double f = time_ms(0, in.x, p, reps), c = time_ms(20, in.x, p, reps);
      std::printf("%-4d | %-4d | %-7d | %-9.3f | %-7.3f (%2d) | %-10.2f\n", b, h, T, f, c, vla::gpu::chunked_vla_group(20, 0, p, b * h, T), f / c);
    }
  std::printf("\n%s\n", ok ? "all checks passed" : "SOME CHECKS FAILED");
  return ok ? 0 : 1;
}
