// Causal softmax attention on the GPU: cuBLAS SGEMMs for q k^T, P v and the backward's products, one
// fused row kernel for the softmax (forward) and for dS = P (dP - rowsum(P dP)) / sqrt(d) (backward).
// Contract, equations and the chunking over queries: gpu/softmax_attention.hpp; measured: docs/gpu.md.
//
// Per query chunk [c0, c0 + rows) and keys [0, Tk), Tk = c0 + rows (keys past the chunk's last query
// are masked for every row of the chunk, so they are never computed), all B H heads in one batched GEMM
// each, row-major (Tc, Tk) score blocks in the workspace (cuBLAS is column-major: a row-major (r, c)
// matrix is its column-major (c, r) transpose, hence the operand order below):
//   forward    S = K Q_c^T / sqrt(d)  -> row kernel: P (masked entries 0)  -> O_c = P V
//   backward   S as forward, dP = dO_c V^T -> row kernel: P into S, dS into dP
//              -> dV += P^T dO_c, dK += dS^T Q_c, dQ_c = dS K
// The row kernel recomputes the row's softmax in the same code as the forward, so the backward's P
// is bitwise the forward's (same chunking, same thread count, same order of every sum).
#include "gpu/softmax_attention.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace vla::gpu {
namespace {

// Online softmax statistics of a set of logits: m = max, l = sum exp(x - m). One element at a time;
// a NaN logit fails every comparison and lands in l (exp(NaN) = NaN), so it reaches every output.
__device__ __forceinline__ void online_add(float& m, float& l, float x) {
  if (x > m) { l = l * expf(m - x) + 1.f; m = x; }
  else l += expf(x - m);
}

// Merge of two partial (m, l). Symmetric in its arguments bit for bit (fmaxf and + commute), so a
// xor butterfly leaves every lane with the same result. m = -inf marks an empty part (l = 0).
__device__ __forceinline__ void online_merge(float& m, float& l, float m2, float l2) {
  if (m2 == -INFINITY) return;
  if (m == -INFINITY) { m = m2; l = l2; return; }
  const float M = fmaxf(m, m2);
  l = l * expf(m - M) + l2 * expf(m2 - M);
  m = M;
}

// Block-wide merge of (m, l) (every thread ends with the same values: the cross-warp merge runs in
// one fixed order in every thread). slot_m, slot_l: NT/32 floats each, used by this call only.
template <int NT> __device__ __forceinline__ void block_softmax_stats(float& m, float& l, float* slot_m, float* slot_l) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) online_merge(m, l, __shfl_xor_sync(0xffffffffu, m, off), __shfl_xor_sync(0xffffffffu, l, off));
  if constexpr (NT > 32) {
    if ((threadIdx.x & 31) == 0) { slot_m[threadIdx.x >> 5] = m; slot_l[threadIdx.x >> 5] = l; }
    __syncthreads();
    m = slot_m[0]; l = slot_l[0];
#pragma unroll
    for (int w = 1; w < NT / 32; ++w) online_merge(m, l, slot_m[w], slot_l[w]);
  }
}

// Block-wide sum, same fixed order in every thread. slot: NT/32 floats, used by this call only.
template <int NT> __device__ __forceinline__ float block_sum(float x, float* slot) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
  if constexpr (NT > 32) {
    if ((threadIdx.x & 31) == 0) slot[threadIdx.x >> 5] = x;
    __syncthreads();
    x = slot[0];
#pragma unroll
    for (int w = 1; w < NT / 32; ++w) x += slot[w];
  }
  return x;
}

// One block per score row r = (bh, i) of the chunk: row i is query t = c0 + i, its valid keys are
// 0..t (n = t + 1 of the row's Tk entries). Writes P_ts = exp(l_ts - m) / sum_s exp(l_ts - m) for s <= t
// and 0 for the masked t < s < Tk (the P V product runs over all Tk columns).
template <int NT> __global__ void __launch_bounds__(NT) softmax_rows_forward(float* S, int rows, int Tk, int c0) {
  __shared__ float slot_m[NT / 32], slot_l[NT / 32];
  const long long r = blockIdx.x;
  const int n = c0 + int(r % rows) + 1;
  float* s = S + r * Tk;
  float m = -INFINITY, l = 0.f;
  for (int j = threadIdx.x; j < n; j += NT) online_add(m, l, s[j]);
  block_softmax_stats<NT>(m, l, slot_m, slot_l);
  for (int j = threadIdx.x; j < Tk; j += NT) s[j] = j < n ? expf(s[j] - m) / l : 0.f;
}

// Backward of one score row: S holds the logits, dP the products do_t . v_s. Recomputes P exactly as
// softmax_rows_forward, writes it into S (for dV), and writes dl_ts = P_ts (dP_ts - sum_r P_tr dP_tr) / sqrt(d)
// into dP (core/model/softmax_backward.hpp's expression, in its order), 0 on the masked entries.
template <int NT>
__global__ void __launch_bounds__(NT) softmax_rows_backward(float* S, float* dP, int rows, int Tk, int c0, float scale) {
  __shared__ float slot_m[NT / 32], slot_l[NT / 32], slot_d[NT / 32];
  const long long r = blockIdx.x;
  const int n = c0 + int(r % rows) + 1;
  float* s = S + r * Tk;
  float* dp = dP + r * Tk;
  float m = -INFINITY, l = 0.f;
  for (int j = threadIdx.x; j < n; j += NT) online_add(m, l, s[j]);
  block_softmax_stats<NT>(m, l, slot_m, slot_l);
  float acc = 0.f;
  for (int j = threadIdx.x; j < Tk; j += NT) {
    const float p = j < n ? expf(s[j] - m) / l : 0.f;
    s[j] = p;
    if (j < n) acc += p * dp[j];
  }
  const float D = block_sum<NT>(acc, slot_d);
  // Each thread reads back only the s[j] it wrote above: no hazard between threads.
  for (int j = threadIdx.x; j < Tk; j += NT) dp[j] = j < n ? s[j] * (dp[j] - D) * scale : 0.f;
}

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
}
void check_blas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string("cuBLAS error in ") + what + ": status " + std::to_string(int(s)));
}

// Row-kernel width by row length: short rows (the training model's T ~ 10..100) take one warp.
void launch_rows(bool backward, float* S, float* dP, long long nrows, int rows, int Tk, int c0, float scale, cudaStream_t st) {
  const unsigned grid = unsigned(nrows);
  if (Tk <= 64) {
    if (backward) softmax_rows_backward<32><<<grid, 32, 0, st>>>(S, dP, rows, Tk, c0, scale);
    else softmax_rows_forward<32><<<grid, 32, 0, st>>>(S, rows, Tk, c0);
  } else if (Tk <= 1024) {
    if (backward) softmax_rows_backward<128><<<grid, 128, 0, st>>>(S, dP, rows, Tk, c0, scale);
    else softmax_rows_forward<128><<<grid, 128, 0, st>>>(S, rows, Tk, c0);
  } else {
    if (backward) softmax_rows_backward<256><<<grid, 256, 0, st>>>(S, dP, rows, Tk, c0, scale);
    else softmax_rows_forward<256><<<grid, 256, 0, st>>>(S, rows, Tk, c0);
  }
  check_cuda(cudaGetLastError(), backward ? "softmax_rows_backward launch" : "softmax_rows_forward launch");
}

void require(bool ok, const std::string& msg) {
  if (!ok) throw std::invalid_argument("softmax attention: " + msg);
}

void validate_shape(int B, int H, int T) {
  require(B >= 1, "B = " + std::to_string(B) + " (allowed: >= 1)");
  require(H >= 1, "H = " + std::to_string(H) + " (allowed: >= 1)");
  require(T >= 1, "T = " + std::to_string(T) + " (allowed: >= 1)");
  require((long long)B * H <= 0x7fffffffLL, "B H = " + std::to_string((long long)B * H) + " exceeds a cuBLAS batch count");
}

void validate(const AttentionInputs& x, const SoftmaxAttentionPlan& plan, const float* ws) {
  validate_shape(x.B, x.H, x.T);
  require(x.d >= 1, "d = " + std::to_string(x.d) + " (allowed: >= 1)");
  require(x.q && x.k && x.v, "q, k and v must be device pointers (one is null)");
  require(plan.chunk >= 1 && plan.chunk <= x.T, "plan.chunk = " + std::to_string(plan.chunk) + " (allowed: 1..T; use softmax_attention_plan)");
  const std::size_t need = 2 * std::size_t(x.B) * x.H * std::size_t(plan.chunk) * x.T;
  require(plan.workspace_floats >= need, "plan.workspace_floats = " + std::to_string(plan.workspace_floats) + " is below this shape's " +
                                             std::to_string(need) + " (a plan made for another shape?)");
  require(ws != nullptr, "workspace is null");
}

// S = K[0:Tk] Q[c0:c0+rows]^T * scale, per head; S row-major (rows, Tk) = column-major (Tk, rows).
void scores(cublasHandle_t h, const AttentionInputs& x, int c0, int rows, int Tk, float* S) {
  const float scale = 1.f / std::sqrt(float(x.d)), zero = 0.f;
  const long long sT = (long long)x.T * x.d;
  check_blas(cublasSgemmStridedBatched(h, CUBLAS_OP_T, CUBLAS_OP_N, Tk, rows, x.d, &scale, x.k, x.d, sT, x.q + (long long)c0 * x.d, x.d,
                                       sT, &zero, S, Tk, (long long)rows * Tk, x.B * x.H), "sgemm scores");
}

}  // namespace

SoftmaxAttentionPlan softmax_attention_plan(int B, int H, int T, std::size_t budget_floats) {
  validate_shape(B, H, T);
  const std::size_t per_row = 2 * std::size_t(B) * H * T;  // one query row in both score buffers
  require(per_row <= budget_floats, "one query row of scores (2 B H T = " + std::to_string(per_row) +
                                        " floats) exceeds the workspace budget of " + std::to_string(budget_floats) + " floats");
  const std::size_t fit = budget_floats / per_row;
  SoftmaxAttentionPlan p;
  p.chunk = int(fit < std::size_t(T) ? fit : std::size_t(T));
  p.workspace_floats = per_row * std::size_t(p.chunk);
  return p;
}

void softmax_attention_forward(cublasHandle_t blas, const AttentionInputs& x, float* o, const SoftmaxAttentionPlan& plan, float* ws) {
  validate(x, plan, ws);
  require(o != nullptr, "o must be a device pointer (null)");
  cudaStream_t st = nullptr;
  check_blas(cublasGetStream(blas, &st), "cublasGetStream");
  const float one = 1.f, zero = 0.f;
  const long long sT = (long long)x.T * x.d;
  const int BH = x.B * x.H;
  for (int c0 = 0; c0 < x.T; c0 += plan.chunk) {
    const int rows = plan.chunk < x.T - c0 ? plan.chunk : x.T - c0, Tk = c0 + rows;
    scores(blas, x, c0, rows, Tk, ws);
    launch_rows(false, ws, nullptr, (long long)BH * rows, rows, Tk, c0, 0.f, st);
    // O_c = P V: column-major (d, rows) = V (d, Tk) . P (Tk, rows).
    check_blas(cublasSgemmStridedBatched(blas, CUBLAS_OP_N, CUBLAS_OP_N, x.d, rows, Tk, &one, x.v, x.d, sT, ws, Tk, (long long)rows * Tk,
                                         &zero, o + (long long)c0 * x.d, x.d, sT, BH), "sgemm P v");
  }
}

void softmax_attention_backward(cublasHandle_t blas, const AttentionInputs& x, const float* dout, float* dq, float* dk, float* dv,
                                const SoftmaxAttentionPlan& plan, float* ws) {
  validate(x, plan, ws);
  require(dout && dq && dk && dv, "dout, dq, dk and dv must be device pointers (one is null)");
  cudaStream_t st = nullptr;
  check_blas(cublasGetStream(blas, &st), "cublasGetStream");
  const float one = 1.f, zero = 0.f, scale = 1.f / std::sqrt(float(x.d));
  const long long sT = (long long)x.T * x.d;
  const int BH = x.B * x.H;
  const std::size_t n = std::size_t(BH) * sT;
  // dK and dV collect every chunk's contribution (keys are shared by all later queries).
  check_cuda(cudaMemsetAsync(dk, 0, n * sizeof(float), st), "cudaMemsetAsync dk");
  check_cuda(cudaMemsetAsync(dv, 0, n * sizeof(float), st), "cudaMemsetAsync dv");
  float* S = ws;
  float* dP = ws + std::size_t(BH) * plan.chunk * x.T;
  for (int c0 = 0; c0 < x.T; c0 += plan.chunk) {
    const int rows = plan.chunk < x.T - c0 ? plan.chunk : x.T - c0, Tk = c0 + rows;
    const long long sS = (long long)rows * Tk;
    const float* q_c = x.q + (long long)c0 * x.d;
    const float* do_c = dout + (long long)c0 * x.d;
    scores(blas, x, c0, rows, Tk, S);
    // dP = dO_c V^T: column-major (Tk, rows) = V^T (Tk, d) . dO_c (d, rows).
    check_blas(cublasSgemmStridedBatched(blas, CUBLAS_OP_T, CUBLAS_OP_N, Tk, rows, x.d, &one, x.v, x.d, sT, do_c, x.d, sT, &zero, dP, Tk,
                                         sS, BH), "sgemm dP");
    launch_rows(true, S, dP, (long long)BH * rows, rows, Tk, c0, scale, st);
    // dV[0:Tk] += P^T dO_c: column-major (d, Tk) += dO_c (d, rows) . P^T (rows, Tk).
    check_blas(cublasSgemmStridedBatched(blas, CUBLAS_OP_N, CUBLAS_OP_T, x.d, Tk, rows, &one, do_c, x.d, sT, S, Tk, sS, &one, dv, x.d, sT,
                                         BH), "sgemm dv");
    // dK[0:Tk] += dS^T Q_c: column-major (d, Tk) += Q_c (d, rows) . dS^T (rows, Tk).
    check_blas(cublasSgemmStridedBatched(blas, CUBLAS_OP_N, CUBLAS_OP_T, x.d, Tk, rows, &one, q_c, x.d, sT, dP, Tk, sS, &one, dk, x.d, sT,
                                         BH), "sgemm dk");
    // dQ_c = dS K: column-major (d, rows) = K (d, Tk) . dS (Tk, rows).
    check_blas(cublasSgemmStridedBatched(blas, CUBLAS_OP_N, CUBLAS_OP_N, x.d, rows, Tk, &one, x.k, x.d, sT, dP, Tk, sS, &zero,
                                         dq + (long long)c0 * x.d, x.d, sT, BH), "sgemm dq");
  }
}

}  // namespace vla::gpu
