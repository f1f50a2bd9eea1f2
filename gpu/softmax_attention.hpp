#pragma once
// Causal softmax attention (paper eq. 2; the CPU rule core/rules/softmax/forward.hpp and its backward
// core/rules/softmax/adjoint.hpp) on the GPU, fp32, forward and backward, built from library GEMMs:
// cuBLAS strided-batched SGEMMs for the three products plus one fused row-softmax kernel each way.
//   l_ts = (q_t . k_s) / sqrt(d)   (s <= t)        P_t = softmax_s(l_ts - max_s l_ts)       o_t = sum_s P_ts v_s
//   dP_ts = do_t . v_s    dl_ts = P_ts (dP_ts - sum_r P_tr dP_tr) / sqrt(d)
//   dq_t = sum_s dl_ts k_s    dk_s = sum_t dl_ts q_t    dv_s = sum_t P_ts do_t
// The same scaling (1/sqrt(d) on the dot product), the same mask (keys s <= t) and no eps, as the CPU rule.
//
// Memory: the T x T score matrix of one head is O(T^2) (at T = 65536 and B H = 32, 550 GB), so the
// queries are processed in chunks of `chunk` rows: chunk c holds the scores of its rows against keys
// [0, c0 + rows) only (the causal mask makes later keys zero), in a workspace of at most `budget_floats`.
// The backward recomputes the scores and P chunk by chunk (nothing of the forward is kept but o).
//
// Tensor layout as gpu/recurrent_forward.hpp: q, k, v, o, do, dq, dk, dv all (B, H, T, d), fp32,
// row-major, on the device. Every element of o (forward) and of dq, dk, dv (backward) is written.
// Host code: plain C++17 (shared by nvcc- and g++-compiled code).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>

namespace vla::gpu {

struct AttentionInputs {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  int B = 0, H = 0, T = 0, d = 0;
};

// Default workspace budget: 2^28 floats (1 GiB). At T = 65536 and B H = 32 that is chunks of 64 queries.
inline constexpr std::size_t kSoftmaxWorkspaceBudgetFloats = std::size_t(1) << 28;

struct SoftmaxAttentionPlan {
  int chunk = 0;                     // query rows per chunk (<= T)
  std::size_t workspace_floats = 0;  // what forward and backward need (the backward's two score buffers)
};

// The largest chunk whose two (B H, chunk, T) score buffers fit in budget_floats (at most T). Throws
// std::invalid_argument naming the parameter for a bad shape or when even one query row does not fit.
SoftmaxAttentionPlan softmax_attention_plan(int B, int H, int T, std::size_t budget_floats = kSoftmaxWorkspaceBudgetFloats);

// Forward: o = causal softmax attention of x. Every launch and GEMM runs on the stream of `blas`
// (cublasSetStream), with its math mode (the toolkit uses CUBLAS_DEFAULT_MATH: plain fp32, no TF32).
// `workspace`: plan.workspace_floats floats. Throws std::invalid_argument for a bad argument (naming it)
// and std::runtime_error naming the call when CUDA or cuBLAS fails. Asynchronous on the stream.
void softmax_attention_forward(cublasHandle_t blas, const AttentionInputs& x, float* o, const SoftmaxAttentionPlan& plan,
                               float* workspace);

// Backward: from x and dL/do, dL/dq, dL/dk, dL/dv (P recomputed from q, k). Same contract as the forward.
void softmax_attention_backward(cublasHandle_t blas, const AttentionInputs& x, const float* dout, float* dq, float* dk,
                                float* dv, const SoftmaxAttentionPlan& plan, float* workspace);

}  // namespace vla::gpu
