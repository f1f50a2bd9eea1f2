#pragma once
// What the GPU development drivers (gpu/dev/*_check.cu) share: every CUDA call checked (CUDA_OK: the call,
// the file and line, then exit status 2), a device buffer that frees itself, and the timing rule of the
// project (CUDA events, the median of `reps` runs after two warm-up runs), a digest of results' bits.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CUDA_OK(call)                                                                                       \
  do {                                                                                                      \
    const cudaError_t e_ = (call);                                                                          \
    if (e_ != cudaSuccess) {                                                                                \
      std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", #call, __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(2);                                                                                         \
    }                                                                                                       \
  } while (0)

namespace vla::gpu::dev {

struct Dev {  // n floats of device memory
  float* p = nullptr;
  explicit Dev(std::size_t n) { CUDA_OK(cudaMalloc(&p, std::max<std::size_t>(n, 1) * sizeof(float))); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  ~Dev() { cudaFree(p); }
};

// Median over `reps` runs of launch() (which returns the launches' cudaError_t), ms, after two warm-up runs.
template <class Launch> double median_ms(int reps, Launch launch) {
  cudaEvent_t a, b;
  CUDA_OK(cudaEventCreate(&a));
  CUDA_OK(cudaEventCreate(&b));
  for (int i = 0; i < 2; ++i) CUDA_OK(launch());
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> ms(std::max(reps, 1));
  for (float& m : ms) {
    CUDA_OK(cudaEventRecord(a));
    CUDA_OK(launch());
    CUDA_OK(cudaEventRecord(b));
    CUDA_OK(cudaEventSynchronize(b));
    CUDA_OK(cudaEventElapsedTime(&m, a, b));
  }
  CUDA_OK(cudaEventDestroy(a));
  CUDA_OK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// FNV-1a over the bits of n floats on the device, continuing from h (kFnvOffset to start): a digest of
// results that two builds meant to compute the same numbers in the same order must print equal. `finite`
// is cleared if one of them is not finite.
inline constexpr std::uint64_t kFnvOffset = 1469598103934665603ull;
inline std::uint64_t fnv1a_bits(std::uint64_t h, const float* device, std::size_t n, bool& finite) {
  std::vector<float> host(n);
  CUDA_OK(cudaMemcpy(host.data(), device, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (const float v : host) {
    finite = finite && std::isfinite(v);
    std::uint32_t bits;
    std::memcpy(&bits, &v, 4);
    h = (h ^ bits) * 1099511628211ull;
  }
  return h;
}

}  // namespace vla::gpu::dev
