// Development driver of the chunk-form VLA backward (gpu/chunked_vla_backward.cu): its check against two
// references on fresh random inputs, and its benchmark, in one run.
//   - The gradient of L = sum_t dout_t . o_t, Algorithm 1 in double on the host (gpu/dev/algorithm1_reference.hpp),
//     by central differences along a random direction of each input: (L(x + h D) - L(x - h D)) / 2h against
//     <grad, D>, relative to ||grad|| ||D|| (a wrong row anywhere moves it at O(its share); fp32 rounding at
//     ~1e-7; the differences' own error at ~1e-9).
//   - The fused sequential backward (gpu/recurrent_backward.cu, the token walk, independent code) on the same
//     inputs, gradient by gradient, normwise: within 2 T d 2^-24 (each is within T d 2^-24 of the exact one,
//     the GPU tests' fp32 bound).
//   - The benchmark: the chunked forward (writing the chunk starts) and the chunk-form backward alone, at
//     (B, H, d) = (8, 4, 32), the anchors' shape (shared/reference/anchors-h100.md); median of `reps`.
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -lineinfo -I. gpu/dev/chunked_vla_backward_check.cu gpu/chunked_vla_backward.cu \
//        gpu/chunked_vla_forward.cu gpu/recurrent_forward.cu gpu/recurrent_backward.cu -o cvlab_check
//   ./cvlab_check [check|bench [T,...] [reps]|phases T|digest]
// (phases: one backward at (8, 4, T, 32); in the build gpu/dev/chunk-bwd-drivers.sh instruments, which times
// every barrier-to-barrier phase of the walks, it prints their cycles per chunk. digest: a hash of the four
// gradients' bits at fixed inputs, for a rebuild that should change no bit, e.g. a kernel whose phases were
// rescheduled without changing any entry's operations.)
//
// Exit status 1 when a check fails or a gradient is not finite.
#include "gpu/chunked_vla_backward.hpp"
#include "gpu/dev/algorithm1_reference.hpp"
#include "gpu/dev/driver_support.hpp"
#include "gpu/recurrent_backward.hpp"
#include "gpu/recurrent_forward.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

// Defined by the instrumented build of gpu/dev/chunk-bwd-drivers.sh (cvlab_phases); null in any other.
extern "C" void cvla_phase_report() __attribute__((weak));

namespace {

using vla::gpu::RecurrentGrads;
using vla::gpu::RecurrentParams;
using vla::gpu::RecurrentTensors;
using vla::gpu::dev::Dev;

constexpr int d = 32;

// One problem on the device: inputs, dout, the chunked forward's output and chunk starts, the backward's
// gradients and workspace, for (B, H, T, d) at chunk C and group_tokens (0: the launch's own).
struct Problem {
  int B, H, T, chunk, group_tokens;
  RecurrentParams p;
  std::size_t N, fwd_floats;
  Dev q, k, v, u, o, dout, dq, dk, dv, du, starts, ws, fwd_ws;  // fwd_ws: the chunked forward's workspace, kept across launches
  RecurrentTensors x;
  RecurrentGrads g;
  Problem(int B_, int H_, int T_, int chunk_, int period, int group_tokens_)
      : B(B_), H(H_), T(T_), chunk(chunk_), group_tokens(group_tokens_), p(params(period)), N(std::size_t(B) * H * T * d),
        fwd_floats(vla::gpu::chunked_vla_forward_workspace_floats(B, H, T, chunk, 0, p)), q(N), k(N),
        v(N), u(N), o(N), dout(N), dq(N), dk(N), dv(N), du(N),
        starts(vla::gpu::chunked_vla_chunk_starts_floats(B, H, T, chunk, p)),
        ws(vla::gpu::chunked_vla_backward_workspace_floats(chunk, p, B, H, T, group_tokens)),
        fwd_ws(fwd_floats) {
    x.q = q.p; x.k = k.p; x.v = v.p; x.u = u.p; x.o = o.p;
    x.B = B; x.H = H; x.T = T; x.d = d;
    g.dout = dout.p; g.dq = dq.p; g.dk = dk.p; g.dv = dv.p; g.du = du.p;
  }
  static RecurrentParams params(int period) {
    RecurrentParams p;
    p.refresh_period = period;
    return p;
  }
  cudaError_t forward() const {
    return vla::gpu::chunked_vla_forward(x, p, chunk, 0, nullptr, starts.p, vla::ProductOperands::Full, fwd_ws.p, fwd_floats);
  }
  cudaError_t backward() const { return vla::gpu::chunked_vla_backward(x, g, p, chunk, group_tokens, starts.p, ws.p); }
};

std::vector<float> to_host(const float* p, std::size_t n) {
  std::vector<float> h(n);
  CUDA_OK(cudaMemcpy(h.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost));
  return h;
}

// L = sum_t dout_t . o_t of Algorithm 1 in double, every sequence.
double loss(const std::vector<double> (&in)[4], const std::vector<float>& dout, int seqs, int T, const RecurrentParams& p) {
  std::vector<double> o(std::size_t(T) * d);
  double L = 0;
  for (int s = 0; s < seqs; ++s) {
    const std::size_t at = std::size_t(s) * T * d;
    vla::gpu::dev::algorithm1(&in[0][at], &in[1][at], &in[2][at], &in[3][at], o.data(), T, d, p);
    for (std::size_t i = 0; i < o.size(); ++i) L += double(dout[at + i]) * o[i];
  }
  return L;
}

const char* const kNames[4] = {"dq", "dk", "dv", "du"};

bool check(int B, int H, int T, int chunk, int period, int group_tokens, unsigned seed, bool differences) {
  Problem pr(B, H, T, chunk, period, group_tokens);
  const std::size_t N = pr.N;
  std::mt19937 gen(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> in[4], dout(N);
  for (auto& t : in) {
    t.resize(N);
    for (float& e : t) e = nd(gen);
  }
  for (float& e : dout) e = nd(gen);
  float* dst[4] = {pr.q.p, pr.k.p, pr.v.p, pr.u.p};
  for (int i = 0; i < 4; ++i) CUDA_OK(cudaMemcpy(dst[i], in[i].data(), N * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(pr.dout.p, dout.data(), N * 4, cudaMemcpyHostToDevice));
  float* grads[4] = {pr.dq.p, pr.dk.p, pr.dv.p, pr.du.p};
  for (float* gp : grads) CUDA_OK(cudaMemset(gp, 0xff, N * 4));  // NaN: a row never written fails
  CUDA_OK(pr.forward());
  CUDA_OK(pr.backward());
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> got[4];
  for (int i = 0; i < 4; ++i) got[i] = to_host(grads[i], N);

  // The fused sequential pair on the same inputs.
  Dev ws(vla::gpu::recurrent_backward_workspace_floats(B, H, T, d)), o2(N), f[4]{Dev(N), Dev(N), Dev(N), Dev(N)};
  RecurrentTensors x = pr.x;
  x.o = o2.p;
  x.checkpoints = ws.p;
  RecurrentGrads g = pr.g;
  g.dq = f[0].p; g.dk = f[1].p; g.dv = f[2].p; g.du = f[3].p;
  CUDA_OK(vla::gpu::recurrent_forward(vla::gpu::RecurrentKind::Vla, x, pr.p));
  CUDA_OK(vla::gpu::recurrent_backward(vla::gpu::RecurrentKind::Vla, x, g, pr.p, ws.p));
  CUDA_OK(cudaDeviceSynchronize());

  const double bound = 2.0 * T * d * std::ldexp(1.0, -24);
  bool ok = true;
  std::printf("check B=%d H=%d T=%-5d C=%-2d refresh=%-2d group=%-4d  vs fused:", B, H, T, chunk, period, group_tokens);
  for (int i = 0; i < 4; ++i) {
    const std::vector<float> ref = to_host(f[i].p, N);
    double num = 0, den = 0;
    bool finite = true;
    for (std::size_t e = 0; e < N; ++e) {
      finite = finite && std::isfinite(got[i][e]);
      num += (double(got[i][e]) - ref[e]) * (double(got[i][e]) - ref[e]);
      den += double(ref[e]) * ref[e];
    }
    const double rel = std::sqrt(num / den);
    ok = ok && finite && rel <= bound;
    std::printf(" %s %.2e", kNames[i], rel);
  }
  std::printf(" (bound %.1e)", bound);
  if (differences) {  // central differences of L along one random direction per input
    std::vector<double> xd[4];
    for (int i = 0; i < 4; ++i) xd[i].assign(in[i].begin(), in[i].end());
    std::printf("  differences:");
    for (int i = 0; i < 4; ++i) {
      std::vector<double> dir(N);
      double dot = 0, gn = 0, dn = 0;
      for (std::size_t e = 0; e < N; ++e) {
        dir[e] = nd(gen);
        dot += double(got[i][e]) * dir[e];
        gn += double(got[i][e]) * got[i][e];
        dn += dir[e] * dir[e];
      }
      const double h = 1e-4;
      const auto loss_at = [&](double step) {  // L with input i moved by step D, then put back
        for (std::size_t e = 0; e < N; ++e) xd[i][e] = double(in[i][e]) + step * dir[e];
        const double L = loss(xd, dout, B * H, T, pr.p);
        for (std::size_t e = 0; e < N; ++e) xd[i][e] = in[i][e];
        return L;
      };
      const double fd = (loss_at(h) - loss_at(-h)) / (2 * h);
      const double rel = std::abs(fd - dot) / std::sqrt(gn * dn);
      ok = ok && rel <= 1e-5;
      std::printf(" %s %.1e", kNames[i], rel);
    }
    std::printf(" (bound 1e-5)");
  }
  std::printf("  %s\n", ok ? "ok" : "FAIL");
  return ok;
}

std::vector<int> parse_list(const char* s) {
  std::vector<int> v;
  for (std::string list = s; !list.empty();) {
    const std::size_t comma = list.find(',');
    v.push_back(std::atoi(list.substr(0, comma).c_str()));
    list = comma == std::string::npos ? "" : list.substr(comma + 1);
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "check";
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  if (mode == "check") {
    bool ok = true;
    // Small enough for the differences (Algorithm 1 in double, eight times): refresh on and off, T a
    // multiple of no chunk, groups of one segment, the launch's own, and more than the sequence.
    ok = check(1, 2, 45, 20, 20, 20, 1, true) && ok;
    ok = check(2, 1, 150, 7, 20, 0, 2, true) && ok;
    ok = check(1, 2, 67, 16, 0, 32, 3, true) && ok;
    ok = check(1, 1, 97, 32, 0, 0, 4, true) && ok;
    ok = check(1, 1, 61, 1, 0, 0, 5, true) && ok;
    // Longer: many groups and chunks, against the fused backward only.
    ok = check(2, 3, 1009, 20, 20, 0, 6, false) && ok;
    ok = check(2, 3, 1009, 20, 20, 60, 7, false) && ok;
    ok = check(2, 3, 1009, 16, 0, 0, 8, false) && ok;
    ok = check(1, 2, 16384, 20, 20, 0, 9, false) && ok;
    std::printf("%s\n", ok ? "all checks passed" : "SOME CHECKS FAILED");
    return ok ? 0 : 1;
  }
  if (mode == "bench" || mode == "phases") {
    const std::vector<int> Ts = parse_list(argc > 2 ? argv[2] : "4096,16384,65536");
    const int reps = mode == "phases" ? 1 : argc > 3 ? std::atoi(argv[3]) : 10;
    std::printf("%-6s | %-5s | %-10s | %-11s | %-11s | %-8s\n", "T", "group", "chunked fwd", "chunk bwd", "fwd+bwd", "(ms, median of reps)");
    for (int T : Ts) {
      Problem pr(8, 4, T, 20, 20, 0);
      float* fill[5] = {pr.q.p, pr.k.p, pr.v.p, pr.u.p, pr.dout.p};
      for (int i = 0; i < 5; ++i) CUDA_OK(vla::gpu::fill_random(fill[i], (long long)pr.N, 11 + i));
      CUDA_OK(pr.forward());
      if (mode == "phases") {
        CUDA_OK(pr.backward());
        CUDA_OK(cudaDeviceSynchronize());
        if (cvla_phase_report) cvla_phase_report();
        else std::printf("phases: this build's walk kernels are not instrumented (gpu/dev/chunk-bwd-drivers.sh builds cvlab_phases)\n");
        continue;
      }
      const double f = vla::gpu::dev::median_ms(reps, [&] { return pr.forward(); });
      const double b = vla::gpu::dev::median_ms(reps, [&] { return pr.backward(); });
      std::printf("%-6d | %-5d | %-10.3f | %-11.3f | %-11.3f |\n", T, vla::gpu::chunked_vla_backward_group_tokens(20, pr.p, 8, 4, T), f, b, f + b);
    }
    return 0;
  }
  if (mode == "digest") {  // FNV-1a over the gradients' bits: refresh 20 (C = 20, 7) and off (C = 16, 32)
    for (const auto [chunk, period] : {std::pair{20, 20}, std::pair{7, 20}, std::pair{16, 0}, std::pair{32, 0}}) {
      Problem pr(2, 3, 1009, chunk, period, 0);
      float* fill[5] = {pr.q.p, pr.k.p, pr.v.p, pr.u.p, pr.dout.p};
      for (int i = 0; i < 5; ++i) CUDA_OK(vla::gpu::fill_random(fill[i], (long long)pr.N, 21 + i));
      CUDA_OK(pr.forward());
      CUDA_OK(pr.backward());
      CUDA_OK(cudaDeviceSynchronize());
      std::uint64_t h = vla::gpu::dev::kFnvOffset;
      bool finite = true;
      for (const float* gp : {pr.dq.p, pr.dk.p, pr.dv.p, pr.du.p}) h = vla::gpu::dev::fnv1a_bits(h, gp, pr.N, finite);
      std::printf("digest C=%-2d refresh=%-2d %016llx\n", chunk, period, static_cast<unsigned long long>(h));
    }
    return 0;
  }
  std::fprintf(stderr, "mode: unknown '%s' (allowed: check, bench, phases, digest)\n", mode.c_str());
  return 2;
}
