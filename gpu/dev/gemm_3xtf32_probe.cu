// Development driver: the fused 3xTF32 GEMM (gpu/gemm_3xtf32.{hpp,cuh}) against cuBLAS SGEMM at the
// training step's shapes.
//
// The question: can fp32-accurate products on the tensor cores lower the GEMM floor of a study sweep
// (docs/studies.md)? cuBLAS's three TF32 passes over split operands are three launches and slower than
// SGEMM; the kernel splits each operand once, in registers, and runs the three mma per tile in one launch
// (the chunked VLA kernels' scheme, gpu/chunked_vla_forward.cu). It is timed, and its error against a float64
// product measured, beside cuBLAS SGEMM making the model's own calls (gpu/train/model.cpp's linear layer
// before it took the kernel) and beside the same kernel with the passes chained along a k tile and with one
// TF32 pass (what the tensor cores give without the split).
//
// The three products of a linear layer with x (n, in), W (out, in), row-major, as gpu/train/model.cpp:
//   fwd: y (n, out) = x W^T          A = x row-major (M = n, K = in), B = W^T (read column-major)
//   dW : dW (out, in) += dy^T x      A = dy^T (read column-major, M = out, K = n), B = x row-major
//   dX : dx (n, in) = dy W           A = dy row-major (M = n, K = out), B = W row-major
// dW reduces over the n tokens; the kernel splits that sum over blocks (split-K) into a workspace that a
// second launch adds in a fixed order (deterministic), as the training step's column sums do.
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -I. gpu/dev/gemm_3xtf32_probe.cu gpu/gemm_3xtf32.cu -lcublas -o gemm_probe
//   ./gemm_probe [shapes [reps [max_rows]]] | [streams R [iters]]
//
// `shapes`: every (op, n, in, out) of the sweep's layers at n = 1600 .. 99328 rows (one run's batch of 64
// sequences at T = 25 and 97, and 16 runs' worth), median us of `reps` launches for each of cuBLAS SGEMM,
// 3xTF32 (each k block of 8 summed from zero on the tensor core, then added in fp32), 3xTF32 chained (the
// passes accumulated on the tensor core across a whole k tile of 32) and one TF32 pass; each one's error
// max |C - C64| / max |C64| against a float64 product of the same inputs.
// `streams R`: R concurrent launches of one run's shapes (n = 1600 and 6208) on R streams, as R concurrent
// training runs issue them; wall per launch, SGEMM against 3xTF32.
//
// Exit status 1 when a result is not finite or a three-pass error exceeds 16 x SGEMM's (a broken kernel).
#include "gpu/dev/driver_support.hpp"
#include "gpu/gemm_3xtf32.cuh"

#include <cublas_v2.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

using vla::gpu::dev::Dev;

#define BLAS_OK(call)                                                                          \
  do {                                                                                         \
    const cublasStatus_t s_ = (call);                                                          \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
      std::fprintf(stderr, "cuBLAS error %d at %s:%d: %s\n", int(s_), __FILE__, __LINE__, #call); \
      std::exit(2);                                                                            \
    }                                                                                          \
  } while (0)

using vla::gpu::MatrixLayout;
using vla::gpu::gemm::Passes;
constexpr MatrixLayout Row = MatrixLayout::RowMajor, Col = MatrixLayout::ColMajor;

// float64 reference: C64 (M x N) = A B, one thread per entry.
template <MatrixLayout LA, MatrixLayout LB> __global__ void reference_kernel(const float* A, const float* B, double* C, int M, int N, int K) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= (long long)M * N) return;
  const int m = i / N, n = i % N;
  double s = 0;
  for (int k = 0; k < K; ++k) {
    const double a = LA == Row ? A[(long long)m * K + k] : A[(long long)k * M + m];
    const double b = LB == Row ? B[(long long)k * N + n] : B[(long long)n * K + k];
    s += a * b;
  }
  C[i] = s;
}

enum class Op { Fwd, DW, DX };
const char* op_name(Op o) { return o == Op::Fwd ? "fwd" : o == Op::DW ? "dW" : "dX"; }

// One linear layer's product at n rows: the operands, the output, the workspace.
struct Problem {
  Op op;
  int n, in, out;
  int M, N, K;
  std::unique_ptr<Dev> A, B, C, work;
  int splits = 1;
  Problem(Op o, int n_, int in_, int out_, std::mt19937& rng) : op(o), n(n_), in(in_), out(out_) {
    M = o == Op::DW ? out : n;
    N = o == Op::Fwd ? out : in;
    K = o == Op::Fwd ? in : o == Op::DW ? n : out;
    A = std::make_unique<Dev>((std::size_t)M * K);
    B = std::make_unique<Dev>((std::size_t)K * N);
    C = std::make_unique<Dev>((std::size_t)M * N);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> h((std::size_t)std::max((long long)M * K, (long long)K * N));
    for (float& v : h) v = nd(rng);
    CUDA_OK(cudaMemcpy(A->p, h.data(), (std::size_t)M * K * 4, cudaMemcpyHostToDevice));
    for (float& v : h) v = nd(rng);
    CUDA_OK(cudaMemcpy(B->p, h.data(), (std::size_t)K * N * 4, cudaMemcpyHostToDevice));
    const vla::gpu::gemm::Plan plan(M, N, K);
    splits = plan.splits;
    work = std::make_unique<Dev>(std::max<std::size_t>(1, vla::gpu::gemm_3xtf32_workspace_floats(M, N, K)));
  }
};

// The kernel's variants: the passes and the split, and the blocks per SM asked of the register allocator
// (0: none asked, as the library's kernel).
struct Variant { Passes passes; int min_blocks; const char* name; };
constexpr Variant kVariants[] = {{Passes::Split3, 0, "3xtf32-2blocks"}, {Passes::Split3, 3, "3xtf32"},
                                 {Passes::Split3, 4, "3xtf32-4blocks"}, {Passes::Split3Chained, 3, "chained"},
                                 {Passes::One, 3, "tf32"}};
constexpr int kNumVariants = sizeof(kVariants) / sizeof(kVariants[0]);

void launch(const Variant& v, const Problem& p, float beta, cudaStream_t s) {
  namespace gm = vla::gpu::gemm;
  const MatrixLayout la = p.op == Op::DW ? Col : Row, lb = p.op == Op::Fwd ? Col : Row;
  auto go = [&](auto kernel_launch) { CUDA_OK(kernel_launch(la, lb, p.M, p.N, p.K, p.A->p, p.B->p, beta, p.C->p, vla::gpu::GemmEpilogue{}, p.work->p, s, vla::gpu::GemmHeads{})); };
  if (v.passes == Passes::Split3 && v.min_blocks == 0) go(gm::launch<Passes::Split3, 0>);
  else if (v.passes == Passes::Split3 && v.min_blocks == 3) go(gm::launch<Passes::Split3, 3>);
  else if (v.passes == Passes::Split3) go(gm::launch<Passes::Split3, 4>);
  else if (v.passes == Passes::Split3Chained) go(gm::launch<Passes::Split3Chained, 3>);
  else go(gm::launch<Passes::One, 3>);
}

// gpu/train/model.cpp's three calls, column-major cuBLAS on the row-major tensors.
void sgemm(cublasHandle_t h, const Problem& p, float beta) {
  const float one = 1.f;
  if (p.op == Op::Fwd)  // y (n, out) = x W^T: A = x (n, in), B's storage = W (out, in)
    BLAS_OK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, p.out, p.n, p.in, &one, p.B->p, p.in, p.A->p, p.in, &beta, p.C->p, p.out));
  else if (p.op == Op::DW)  // dW (out, in) += dy^T x: A's storage = dy (n, out), B = x (n, in)
    BLAS_OK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, p.in, p.out, p.n, &one, p.B->p, p.in, p.A->p, p.out, &beta, p.C->p, p.in));
  else  // dx (n, in) = dy W: A = dy (n, out), B = W (out, in)
    BLAS_OK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, p.in, p.n, p.out, &one, p.B->p, p.in, p.A->p, p.out, &beta, p.C->p, p.in));
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

struct Reference {
  std::vector<double> c64;
  double scale;
};
Reference reference(const Problem& p) {
  double* d64;
  const long long mn = (long long)p.M * p.N;
  CUDA_OK(cudaMalloc(&d64, mn * 8));
  const int blocks = (mn + 255) / 256;
  if (p.op == Op::Fwd) reference_kernel<Row, Col><<<blocks, 256>>>(p.A->p, p.B->p, d64, p.M, p.N, p.K);
  else if (p.op == Op::DW) reference_kernel<Col, Row><<<blocks, 256>>>(p.A->p, p.B->p, d64, p.M, p.N, p.K);
  else reference_kernel<Row, Row><<<blocks, 256>>>(p.A->p, p.B->p, d64, p.M, p.N, p.K);
  CUDA_OK(cudaGetLastError());
  Reference r{std::vector<double>(mn), 0};
  CUDA_OK(cudaMemcpy(r.c64.data(), d64, mn * 8, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaFree(d64));
  r.scale = max_abs(r.c64);
  return r;
}
// max |C - C64| / max |C64|; -1 when C holds a non-finite value.
double error(const Problem& p, const Reference& r) {
  std::vector<float> c((std::size_t)p.M * p.N);
  CUDA_OK(cudaMemcpy(c.data(), p.C->p, c.size() * 4, cudaMemcpyDeviceToHost));
  double e = 0;
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (!std::isfinite(c[i])) return -1;
    e = std::max(e, std::abs(c[i] - r.c64[i]));
  }
  return e / r.scale;
}

constexpr int kRows[] = {1600, 6208, 25600, 99328};
constexpr int kInOut[][2] = {{128, 384}, {128, 128}, {128, 256}, {256, 128}};  // Wqkv, Wo, W1, W2 (d_model 128, 4 heads of 32, ffn 256)

int shapes(int reps, int max_rows) {
  std::mt19937 rng(7);
  cublasHandle_t h;
  BLAS_OK(cublasCreate(&h));
  BLAS_OK(cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH));  // fp32 FMAs, as the training step's handle
  std::printf("op n in out | M N K splits | us: sgemm");
  for (const Variant& v : kVariants) std::printf(" %s", v.name);
  std::printf(" | sgemm/%s sgemm/%s | err: sgemm", kVariants[0].name, kVariants[1].name);
  for (const Variant& v : kVariants) std::printf(" %s", v.name);
  std::printf("\n");
  int bad = 0;
  for (int n : kRows)
    for (const auto& io : kInOut)
      for (Op op : {Op::Fwd, Op::DW, Op::DX}) {
        if (n > max_rows) continue;
        Problem p(op, n, io[0], io[1], rng);
        const Reference ref = reference(p);
        double us[1 + kNumVariants], err[1 + kNumVariants];
        us[0] = 1e3 * vla::gpu::dev::median_ms(reps, [&] { sgemm(h, p, 0.f); return cudaGetLastError(); });
        sgemm(h, p, 0.f);
        err[0] = error(p, ref);
        for (int i = 0; i < kNumVariants; ++i) {
          us[i + 1] = 1e3 * vla::gpu::dev::median_ms(reps, [&] { launch(kVariants[i], p, 0.f, 0); return cudaGetLastError(); });
          CUDA_OK(cudaMemset(p.C->p, 0, (std::size_t)p.M * p.N * 4));
          launch(kVariants[i], p, 0.f, 0);
          err[i + 1] = error(p, ref);
        }
        CUDA_OK(cudaDeviceSynchronize());
        std::printf("%s %d %d %d | %d %d %d %d |", op_name(op), n, p.in, p.out, p.M, p.N, p.K, p.splits);
        for (int i = 0; i <= kNumVariants; ++i) std::printf(" %.1f", us[i]);
        std::printf(" | %.2f %.2f |", us[0] / us[1], us[0] / us[2]);
        for (int i = 0; i <= kNumVariants; ++i) std::printf(" %.1e", err[i]);
        std::printf("\n");
        std::fflush(stdout);
        for (int i = 0; i <= kNumVariants; ++i) bad += err[i] < 0;
        for (int i = 1; i <= kNumVariants; ++i) bad += kVariants[i - 1].passes != Passes::One && err[i] > 16 * err[0];
      }
  BLAS_OK(cublasDestroy(h));
  return bad ? 1 : 0;
}

// R streams, each its own operands, `iters` rounds of one launch per stream; wall per launch (us), median
// of 5 such rounds after one warm-up round.
int streams(int R, int iters) {
  std::mt19937 rng(11);
  std::vector<cudaStream_t> st(R);
  std::vector<cublasHandle_t> hs(R);
  for (int i = 0; i < R; ++i) {
    CUDA_OK(cudaStreamCreateWithFlags(&st[i], cudaStreamNonBlocking));
    BLAS_OK(cublasCreate(&hs[i]));
    BLAS_OK(cublasSetMathMode(hs[i], CUBLAS_PEDANTIC_MATH));
    BLAS_OK(cublasSetStream(hs[i], st[i]));
  }
  std::printf("%d streams: op n in out | us per launch: sgemm", R);
  for (const Variant& v : kVariants) std::printf(" %s", v.name);
  std::printf(" | sgemm/%s sgemm/%s\n", kVariants[0].name, kVariants[1].name);
  for (int n : {1600, 6208})
    for (const auto& io : kInOut)
      for (Op op : {Op::Fwd, Op::DW, Op::DX}) {
        std::vector<std::unique_ptr<Problem>> ps;
        for (int i = 0; i < R; ++i) ps.push_back(std::make_unique<Problem>(op, n, io[0], io[1], rng));
        auto wall = [&](const Variant* v) {  // null: cuBLAS
          std::vector<double> w;
          for (int round = 0; round < 6; ++round) {
            CUDA_OK(cudaDeviceSynchronize());
            const auto t0 = std::chrono::steady_clock::now();
            for (int it = 0; it < iters; ++it)
              for (int i = 0; i < R; ++i) {
                if (!v) sgemm(hs[i], *ps[i], 1.f);
                else launch(*v, *ps[i], 1.f, st[i]);
              }
            CUDA_OK(cudaDeviceSynchronize());
            if (round > 0) w.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / (iters * R));
          }
          std::sort(w.begin(), w.end());
          return w[w.size() / 2];
        };
        double w[1 + kNumVariants];
        w[0] = wall(nullptr);
        for (int i = 0; i < kNumVariants; ++i) w[i + 1] = kVariants[i].passes == Passes::One ? 0 : wall(&kVariants[i]);
        std::printf("%s %d %d %d |", op_name(op), n, io[0], io[1]);
        for (int i = 0; i <= kNumVariants; ++i) std::printf(" %.2f", w[i]);
        std::printf(" | %.2f %.2f\n", w[0] / w[1], w[0] / w[2]);
        std::fflush(stdout);
      }
  for (int i = 0; i < R; ++i) {
    BLAS_OK(cublasDestroy(hs[i]));
    CUDA_OK(cudaStreamDestroy(st[i]));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "shapes";
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  if (mode == "shapes") {
    const int reps = argc > 2 ? std::atoi(argv[2]) : 50, max_rows = argc > 3 ? std::atoi(argv[3]) : 1 << 30;
    if (reps < 1 || max_rows < 1) { std::fprintf(stderr, "shapes: reps and max_rows must be at least 1\n"); return 2; }
    return shapes(reps, max_rows);
  }
  if (mode == "streams") {
    const int R = argc > 2 ? std::atoi(argv[2]) : 16, iters = argc > 3 ? std::atoi(argv[3]) : 20;
    if (R < 1 || iters < 1) { std::fprintf(stderr, "streams: R and iters must be at least 1\n"); return 2; }
    return streams(R, iters);
  }
  std::fprintf(stderr, "mode must be shapes or streams, not '%s'\n", mode.c_str());
  return 2;
}
