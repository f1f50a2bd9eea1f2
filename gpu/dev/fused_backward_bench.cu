// Development driver of the fused sequential VLA backward (gpu/recurrent_backward.cu, the token walk) at the
// shapes training gives it: many short sequences. Per shape (B H sequences of T tokens, d = 32, the `vla`
// preset, refresh 20): the forward writing its checkpoints, then the backward alone, median of `reps`; and
// a digest of the four gradients' bits, so that two builds which should compute the same numbers in the same
// order (a different home for a matrix, a different register budget) can be compared bit for bit.
// `streams R` runs R launches of B H = 256 (one training run's batch 64 x 4 heads) on R streams at once,
// as R concurrent training runs issue them, and reports the wall per launch.
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -I. gpu/dev/fused_backward_bench.cu gpu/recurrent_forward.cu \
//        gpu/recurrent_backward.cu -o fused_bwd_bench
//   ./fused_bwd_bench [shapes [reps [d [BH T]]]|streams R T [reps]]
//
// Exit status 1 when a gradient is not finite.
#include "gpu/dev/driver_support.hpp"
#include "gpu/recurrent_backward.hpp"
#include "gpu/recurrent_forward.hpp"

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

using vla::gpu::RecurrentGrads;
using vla::gpu::RecurrentKind;
using vla::gpu::RecurrentParams;
using vla::gpu::RecurrentTensors;
using vla::gpu::dev::Dev;

int d = 32;  // the head width: `shapes` takes it

// One problem on the device: inputs q, k, v, u, dout (S, T, d) with S = B H sequences, the output, the
// checkpoints workspace and the four gradients.
struct Problem {
  int S, T;
  RecurrentParams p;
  std::size_t N;
  Dev q, k, v, u, o, dout, dq, dk, dv, du, ws;
  RecurrentTensors x;
  RecurrentGrads g;
  Problem(int S_, int T_, unsigned seed)
      : S(S_), T(T_), N(std::size_t(S) * T * d), q(N), k(N), v(N), u(N), o(N), dout(N), dq(N), dk(N), dv(N), du(N),
        ws(vla::gpu::recurrent_backward_workspace_floats(S, 1, T, d)) {
    p.refresh_period = 20;
    x.q = q.p; x.k = k.p; x.v = v.p; x.u = u.p; x.o = o.p;
    x.B = S; x.H = 1; x.T = T; x.d = d;
    x.checkpoints = ws.p;
    g.dout = dout.p; g.dq = dq.p; g.dk = dk.p; g.dv = dv.p; g.du = du.p;
    std::mt19937 gen(seed);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> h(N);
    for (float* dst : {q.p, k.p, v.p, u.p, dout.p}) {
      for (float& e : h) e = nd(gen);
      CUDA_OK(cudaMemcpy(dst, h.data(), N * sizeof(float), cudaMemcpyHostToDevice));
    }
  }
  cudaError_t forward(cudaStream_t s = nullptr) const { return vla::gpu::recurrent_forward(RecurrentKind::Vla, x, p, s); }
  cudaError_t backward(cudaStream_t s = nullptr) const { return vla::gpu::recurrent_backward(RecurrentKind::Vla, x, g, p, ws.p, s); }
  // The four gradients' digest (driver_support.hpp); false when one of them is not finite.
  bool digest(std::uint64_t& h) const {
    bool finite = true;
    h = vla::gpu::dev::kFnvOffset;
    for (const float* src : {dq.p, dk.p, dv.p, du.p}) h = vla::gpu::dev::fnv1a_bits(h, src, N, finite);
    return finite;
  }
};

int shapes(int reps, std::vector<std::array<int, 2>> shape) {
  int bad = 0;
  std::printf("fused VLA backward, d = %d, refresh 20 (ms, median of %d)\n", d, reps);
  std::printf("%6s %5s | %8s %8s | %s\n", "B H", "T", "forward", "backward", "digest (dq dk dv du bits)");
  for (const auto& sh : shape) {
    Problem pr(sh[0], sh[1], 7u + unsigned(sh[0]) * 31u + unsigned(sh[1]));
    const double f = vla::gpu::dev::median_ms(reps, [&] { return pr.forward(); });
    CUDA_OK(pr.forward());
    const double b = vla::gpu::dev::median_ms(reps, [&] { return pr.backward(); });
    CUDA_OK(cudaDeviceSynchronize());
    std::uint64_t h = 0;
    const bool ok = pr.digest(h);
    bad += !ok;
    std::printf("%6d %5d | %8.4f %8.4f | %016llx%s\n", sh[0], sh[1], f, b, static_cast<unsigned long long>(h), ok ? "" : "  NOT FINITE");
  }
  return bad ? 1 : 0;
}

// R problems of 256 sequences on R streams: the backward of each launched on its own stream, all at once.
int streams(int R, int T, int reps) {
  std::vector<std::unique_ptr<Problem>> prs;
  std::vector<cudaStream_t> st(R);
  for (int r = 0; r < R; ++r) {
    prs.push_back(std::make_unique<Problem>(256, T, 100u + unsigned(r)));
    CUDA_OK(cudaStreamCreateWithFlags(&st[r], cudaStreamNonBlocking));
    CUDA_OK(prs.back()->forward(st[r]));
  }
  CUDA_OK(cudaDeviceSynchronize());
  // The events on the legacy stream bracket every stream's work: each stream waits on the start event
  // and the end event waits on each stream.
  cudaEvent_t go;
  CUDA_OK(cudaEventCreateWithFlags(&go, cudaEventDisableTiming));
  std::vector<cudaEvent_t> done(R);
  for (auto& e : done) CUDA_OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  const double ms = vla::gpu::dev::median_ms(reps, [&]() -> cudaError_t {
    cudaError_t e = cudaEventRecord(go, nullptr);
    for (int r = 0; r < R && e == cudaSuccess; ++r) {
      if ((e = cudaStreamWaitEvent(st[r], go, 0)) != cudaSuccess) break;
      if ((e = prs[r]->backward(st[r])) != cudaSuccess) break;
      if ((e = cudaEventRecord(done[r], st[r])) != cudaSuccess) break;
      e = cudaStreamWaitEvent(nullptr, done[r], 0);
    }
    return e;
  });
  int bad = 0;
  for (const auto& pr : prs) {
    std::uint64_t h;
    bad += !pr->digest(h);
  }
  std::printf("streams R=%-3d T=%-4d B H=256 each: %.4f ms for all, %.4f ms per launch%s\n", R, T, ms, ms / R, bad ? "  NOT FINITE" : "");
  for (auto& s : st) CUDA_OK(cudaStreamDestroy(s));
  return bad ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "shapes";
  if (mode == "shapes") {
    if (argc > 3) d = std::atoi(argv[3]);
    if (d != 16 && d != 32 && d != 64) {
      std::fprintf(stderr, "d: 16, 32 or 64, got %d\n", d);
      return 2;
    }
    std::vector<std::array<int, 2>> shape = {{256, 25}, {256, 97}, {4096, 25}, {4096, 97}, {1024, 190}, {32, 4096}};
    if (argc > 5) shape = {{std::atoi(argv[4]), std::atoi(argv[5])}};  // one shape, e.g. small for the sanitizers
    if (shape[0][0] < 1 || shape[0][1] < 1) {
      std::fprintf(stderr, "B H and T: at least 1\n");
      return 2;
    }
    return shapes(argc > 2 ? std::atoi(argv[2]) : 20, shape);
  }
  if (mode == "streams" && argc > 3) {
    const int R = std::atoi(argv[2]), T = std::atoi(argv[3]);
    if (R < 1 || T < 1) {
      std::fprintf(stderr, "streams: R and T at least 1, got %d and %d\n", R, T);
      return 2;
    }
    return streams(R, T, argc > 4 ? std::atoi(argv[4]) : 20);
  }
  std::fprintf(stderr, "usage: %s [shapes [reps [d [BH T]]]|streams R T [reps]]\n", argv[0]);
  return 2;
}
