#pragma once
// Host-side CUDA helpers shared by gpu/, the GPU tests and the benchmark: every CUDA return code is
// checked (a failure throws std::runtime_error naming the call and CUDA's message), and device
// buffers are owned by an RAII handle so that an exception never leaks device memory.
#include <cuda_runtime.h>

#include <fmt/format.h>

#include <cstddef>
#include <stdexcept>
#include <vector>

namespace vla::gpu {

inline void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(fmt::format("CUDA error in {}: {}", what, cudaGetErrorString(err)));
}

// Makes `device` the calling thread's current GPU for a scope, and the previous one current again after
// it: an object built on one GPU (its buffers, stream and cuBLAS handle belong to that GPU) can then be
// used from any host thread, on a machine with several.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    check(cudaGetDevice(&previous_), "cudaGetDevice");
    if (device != previous_) check(cudaSetDevice(device), "cudaSetDevice");
  }
  ~DeviceGuard() { cudaSetDevice(previous_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

// A device array of n floats.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n) : n_(n) {
    if (n) check(cudaMalloc(&p_, n * sizeof(float)), "cudaMalloc");
  }
  explicit DeviceBuffer(const std::vector<float>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() { if (p_) cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr; o.n_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) { if (p_) cudaFree(p_); p_ = o.p_; n_ = o.n_; o.p_ = nullptr; o.n_ = 0; }
    return *this;
  }

  float* get() const { return p_; }
  std::size_t size() const { return n_; }
  void upload(const std::vector<float>& host) {
    if (host.size() != n_) throw std::logic_error("DeviceBuffer::upload: size mismatch");
    if (n_) check(cudaMemcpy(p_, host.data(), n_ * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  }
  std::vector<float> download() const {
    std::vector<float> h(n_);
    if (n_) check(cudaMemcpy(h.data(), p_, n_ * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
    return h;
  }
  // All bytes 0xFF: every float is a NaN, so an element a kernel fails to write is caught.
  void poison() { if (n_) check(cudaMemset(p_, 0xFF, n_ * sizeof(float)), "cudaMemset"); }

 private:
  float* p_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace vla::gpu
