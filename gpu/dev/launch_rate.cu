// How many kernel launches per second one process gets from the GPU: THREADS host threads, each with its
// own non-blocking stream (as concurrent training runs have, gpu/train/trainer.cpp), launch an empty
// kernel L times, with or without a stream sync every 150 launches (a training step's host round trip).
// The ceiling this prints is what a sweep's launch count is measured against (docs/gpu.md, "Training
// throughput"). Build and run on a CUDA machine:
//   nvcc -std=c++17 -O2 -arch=sm_90 -o /tmp/launch_rate gpu/dev/launch_rate.cu && /tmp/launch_rate
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "CUDA error in %s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

__global__ void empty_k(float* x) {
  if (x) x[threadIdx.x] = 0.f;  // never taken (x is null): the kernel does nothing but exist
}

}  // namespace

int main() {
  constexpr int kLaunches = 20000;
  check(cudaFree(nullptr), "context");
  for (const int sync_every : {0, 150})
    for (const int grid : {1, 64})
      for (const int threads : {1, 2, 4, 8, 16}) {
        std::vector<cudaStream_t> streams(threads);
        for (auto& s : streams) check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
        for (auto& s : streams) {  // warm-up: the module is loaded before the clock starts
          empty_k<<<grid, 128, 0, s>>>(nullptr);
          check(cudaGetLastError(), "warm-up launch");
          check(cudaStreamSynchronize(s), "warm-up sync");
        }
        std::vector<cudaError_t> err(threads, cudaSuccess);
        const auto t0 = std::chrono::steady_clock::now();
        std::vector<std::thread> pool;
        for (int i = 0; i < threads; ++i)
          pool.emplace_back([&, i] {
            for (int k = 0; k < kLaunches && err[i] == cudaSuccess; ++k) {
              empty_k<<<grid, 128, 0, streams[i]>>>(nullptr);
              err[i] = cudaGetLastError();
              if (err[i] == cudaSuccess && sync_every && k % sync_every == sync_every - 1) err[i] = cudaStreamSynchronize(streams[i]);
            }
            if (err[i] == cudaSuccess) err[i] = cudaStreamSynchronize(streams[i]);
          });
        for (auto& t : pool) t.join();
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        for (const cudaError_t e : err) check(e, "launch loop");
        std::printf("threads %2d  grid %3d  sync every %3d: %7.0f launches/s (%.2f us each)\n", threads, grid, sync_every,
                    threads * kLaunches / s, 1e6 * s / (threads * kLaunches));
        for (auto& st : streams) check(cudaStreamDestroy(st), "stream destroy");
      }
  return 0;
}
