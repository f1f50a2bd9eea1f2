#include "tests/gpu/phi_probe.hpp"

#include "core/phi.hpp"
#include "gpu/cuda_check.hpp"

namespace vla::gpu::test {
namespace {

__global__ void phi_kernel(const float* x, float* phi, float* dphi, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    phi[i] = elu_plus_one(x[i]);
    dphi[i] = elu_plus_one_grad(x[i]);
  }
}

}  // namespace

void phi_on_device(const std::vector<float>& x, std::vector<float>& phi, std::vector<float>& dphi) {
  const int n = static_cast<int>(x.size());
  DeviceBuffer X(x), P(x.size()), DP(x.size());
  phi_kernel<<<(n + 255) / 256, 256>>>(X.get(), P.get(), DP.get(), n);
  check(cudaGetLastError(), "phi_kernel launch");
  check(cudaDeviceSynchronize(), "phi_kernel");
  phi = P.download();
  dphi = DP.download();
}

}  // namespace vla::gpu::test
