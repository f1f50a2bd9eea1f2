#pragma once
// Fused forward kernels of the recurrent mixers (VLA Algorithm 1, linear attention, DeltaNet) on
// already-projected per-token inputs. One launch covers all T steps; one thread block owns one
// (batch, head) sequence and keeps its state (S, and A for VLA) in registers for the whole sequence.
// Plain C++17 (no Eigen): this header is shared by nvcc-compiled and g++-compiled code.
//
// Tensor layout (all fp32, row-major, on the device):
//   q, k, v   (B, H, T, d)   W_q x + b_q, the raw key k_raw, W_v x + b_v
//   u         (B, H, T, d)   VLA only: u_raw = W_u k_raw + b_u (rank 1)
//   g         (B, H, T)      DeltaNet only: gate logit, beta = sigmoid(g); null = ungated (beta = 1)
//   o         (B, H, T, d)   output, eq. (11)
//   stats     (B, H, T, 3)   optional (null = off): ||S_t||_F, ||A_t||_F, delta_t (NaN where a rule has none)
#include <cuda_runtime.h>

namespace vla::gpu {

enum class RecurrentKind { Vla, Linear, DeltaNet };

struct RecurrentParams {
  // Hyper-parameters as core/rules/*.hpp name them (defaults = Algorithm 1's).
  float eps = 1e-4f;           // every denominator's floor (delta clamp, read denominator)
  float lambda0 = 0.1f;        // VLA: A_0 = I / lambda0
  int refresh_period = 20;     // VLA: A += refresh_eta I after step t when (t+1) % period == 0; 0 = off
  float refresh_eta = 1e-3f;
};

struct RecurrentTensors {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  const float* u = nullptr;  // VLA
  const float* g = nullptr;  // DeltaNet (optional)
  float* o = nullptr;
  float* stats = nullptr;    // optional
  int B = 0, H = 0, T = 0, d = 0;
};

// Launches the fused forward on `stream`. Returns the launch's error (cudaGetLastError after the
// launch) or cudaErrorInvalidValue for an unsupported d (allowed: 16, 32, 64, 128) or a missing input.
cudaError_t recurrent_forward(RecurrentKind kind, const RecurrentTensors& x, const RecurrentParams& p,
                              cudaStream_t stream = nullptr);

// Fills n floats with deterministic pseudo-random values, uniform on [-sqrt(3), sqrt(3)] (unit
// variance), from a counter-based hash of (seed, index): for benchmarks and tests that need large
// random inputs without a host round trip.
cudaError_t fill_random(float* x, long long n, unsigned long long seed, cudaStream_t stream = nullptr);

}  // namespace vla::gpu
