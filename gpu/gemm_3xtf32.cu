// gpu/gemm_3xtf32.hpp: the contract's checks around the kernels of gpu/gemm_3xtf32.cuh.
#include "gpu/gemm_3xtf32.cuh"

#include <cstdint>

namespace vla::gpu {

bool gemm_3xtf32_serves(int M, int N, int K, const void* A, const void* B, const void* C, MatrixLayout a_layout, MatrixLayout b_layout,
                        const GemmHeads& heads) {
  const auto aligned = [](const void* p) { return p != nullptr && reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  // A head-major matrix stored rows x cols: whole sequences of T rows, whole heads of d columns in each of its
  // groups, d a multiple of 4.
  const auto fits = [](HeadMajor h, int rows, int cols) {
    return !h.on() || (h.d > 0 && h.d % 4 == 0 && h.groups >= 1 && rows % h.T == 0 && cols % (h.groups * h.d) == 0);
  };
  const bool a_row = a_layout == MatrixLayout::RowMajor, b_row = b_layout == MatrixLayout::RowMajor;
  const bool launchable = (M + gemm::BM - 1) / gemm::BM <= 65535;  // row tiles on gridDim.y
  return M >= 1 && N >= 1 && K >= 1 && M % 4 == 0 && N % 4 == 0 && K % 4 == 0 && launchable && aligned(A) && aligned(B) && aligned(C) &&
         fits(heads.a, a_row ? M : K, a_row ? K : M) && fits(heads.b, b_row ? K : N, b_row ? N : K) && fits(heads.c, M, N);
}

std::size_t gemm_3xtf32_workspace_floats(int M, int N, int K) {
  const gemm::Plan plan(M, N, K);
  return plan.splits > 1 ? static_cast<std::size_t>(plan.splits) * (static_cast<std::size_t>(M) * N + M) : 0;
}

cudaError_t gemm_3xtf32(MatrixLayout a_layout, MatrixLayout b_layout, int M, int N, int K, const float* A, const float* B, float beta,
                        float* C, const GemmEpilogue& epilogue, float* workspace, std::size_t workspace_floats, cudaStream_t stream,
                        const GemmHeads& heads) {
  if (!gemm_3xtf32_serves(M, N, K, A, B, C, a_layout, b_layout, heads)) return cudaErrorInvalidValue;
  const std::size_t need = gemm_3xtf32_workspace_floats(M, N, K);
  if (need > 0 && (workspace == nullptr || workspace_floats < need || reinterpret_cast<std::uintptr_t>(workspace) % 16 != 0))
    return cudaErrorInvalidValue;
  return gemm::launch<gemm::Passes::Split3, 3>(a_layout, b_layout, M, N, K, A, B, beta, C, epilogue, workspace, stream, heads);
}

}  // namespace vla::gpu
