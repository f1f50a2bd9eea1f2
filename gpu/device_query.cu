#include "gpu/device_query.hpp"

#include <cuda_runtime.h>

#include <fmt/format.h>

namespace vla::gpu {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

std::string describe_devices() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return fmt::format("no CUDA device: {}", cudaGetErrorString(err));
  }
  std::string s;
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    s += fmt::format("device {}: {} (sm_{}{}), {} SMs, {:.1f} GiB, {} KiB shared memory per block (opt-in)\n", i,
                     p.name, p.major, p.minor, p.multiProcessorCount, double(p.totalGlobalMem) / (1 << 30),
                     p.sharedMemPerBlockOptin / 1024);
  }
  return s.empty() ? "no CUDA device visible\n" : s;
}

}  // namespace vla::gpu
