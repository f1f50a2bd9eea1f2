#pragma once
// core/phi.hpp's feature map and its derivative evaluated in device code, element by element, for
// tests/gpu/test_phi_device.cpp (the kernels inline the same header; this is its device form in isolation).
#include <vector>

namespace vla::gpu::test {

// phi(x[i]) and phi'(x[i]) computed on the device; throws std::runtime_error naming the CUDA call that failed.
void phi_on_device(const std::vector<float>& x, std::vector<float>& phi, std::vector<float>& dphi);

}  // namespace vla::gpu::test
