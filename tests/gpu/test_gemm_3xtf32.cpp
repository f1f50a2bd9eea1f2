// The fused 3xTF32 GEMM (gpu/gemm_3xtf32.hpp) against products in double on the host: every operand layout,
// shapes with ragged tiles (M, N not multiples of 64, K not of 32), a K split over blocks and one that is not,
// beta 0 and 1; the same bits twice; the refusals.
#include "gpu/cuda_check.hpp"
#include "gpu/device_query.hpp"
#include "gpu/gemm_3xtf32.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

namespace {

using vla::gpu::DeviceBuffer;
using vla::gpu::MatrixLayout;
using vla::gpu::check;

constexpr double kU = 5.9604644775390625e-08;  // fp32 unit roundoff

std::vector<float> upload_random(DeviceBuffer& d, std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> x(n);
  for (auto& v : x) v = u(rng);
  d = DeviceBuffer(n);
  check(cudaMemcpy(d.get(), x.data(), n * sizeof(float), cudaMemcpyHostToDevice), "upload");
  return x;
}

std::vector<float> download(const DeviceBuffer& d, std::size_t n) {
  std::vector<float> x(n);
  check(cudaMemcpy(x.data(), d.get(), n * sizeof(float), cudaMemcpyDeviceToHost), "download");
  return x;
}

}  // namespace

// If it failed: a fragment read from the wrong row or column (an O(1) error), a ragged tile's edge read past
// the matrix or left out, a K slice lost or added twice, beta applied twice or not at all, the bias added to
// the wrong column or per slice, a row sum missing a tile or slice, or the split's remainder dropped (one
// TF32 pass: ~2^-11 of the terms, far above the bound).
TEST_CASE("3xTF32 GEMM equals the product in double to fp32's rounding, every layout, ragged and split shapes", "[gpu]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: skipped"); return; }
  struct Shape { int M, N, K; };
  // (68, 36, 20): one ragged tile, K below one k tile; (132, 200, 2100): ragged tiles and a split K with a
  // short last slice; (128, 64, 256): exact tiles, one slice; (4, 4, 4): the smallest the contract takes.
  const Shape shapes[] = {{68, 36, 20}, {132, 200, 2100}, {128, 64, 256}, {4, 4, 4}};
  std::mt19937 rng(20261127);
  for (const auto& [M, N, K] : shapes)
    for (const MatrixLayout la : {MatrixLayout::RowMajor, MatrixLayout::ColMajor})
      for (const MatrixLayout lb : {MatrixLayout::RowMajor, MatrixLayout::ColMajor})
        for (const bool with_epilogue : {false, true}) {  // beta 0 alone; beta 1 with the bias and A's row sums
          const float beta = with_epilogue ? 1.f : 0.f;
          DeviceBuffer A, B, C, bias, rsum, work(std::max<std::size_t>(1, vla::gpu::gemm_3xtf32_workspace_floats(M, N, K)));
          const auto a = upload_random(A, std::size_t(M) * K, rng), b = upload_random(B, std::size_t(K) * N, rng);
          const auto c0 = upload_random(C, std::size_t(M) * N, rng);
          const auto bias0 = upload_random(bias, std::size_t(N), rng), rsum0 = upload_random(rsum, std::size_t(M), rng);
          const vla::gpu::GemmEpilogue ep = with_epilogue ? vla::gpu::GemmEpilogue{bias.get(), rsum.get()} : vla::gpu::GemmEpilogue{};
          REQUIRE(vla::gpu::gemm_3xtf32_serves(M, N, K, A.get(), B.get(), C.get()));
          check(vla::gpu::gemm_3xtf32(la, lb, M, N, K, A.get(), B.get(), beta, C.get(), ep, work.get(), work.size(), nullptr), "gemm_3xtf32");
          check(cudaDeviceSynchronize(), "sync");
          const auto c = download(C, std::size_t(M) * N), rs = download(rsum, std::size_t(M));
          const bool ar = la == MatrixLayout::RowMajor, br = lb == MatrixLayout::RowMajor;
          const auto a_at = [&](int m, int k) { return ar ? a[std::size_t(m) * K + k] : a[std::size_t(k) * M + m]; };
          // Each entry's error relative to its condition, |c - exact| / sum |terms|, for the kernel and for the
          // host's own fp32 sum in k order (the yardstick: what fp32 products give).
          double worst = 0, worst_host = 0;
          for (int m = 0; m < M; ++m)
            for (int n = 0; n < N; ++n) {
              double exact = beta * double(c0[std::size_t(m) * N + n]), abs_sum = std::abs(exact);
              float host = beta * c0[std::size_t(m) * N + n];
              for (int k = 0; k < K; ++k) {
                const float x = a_at(m, k);
                const float y = br ? b[std::size_t(k) * N + n] : b[std::size_t(n) * K + k];
                exact += double(x) * double(y);
                abs_sum += std::abs(double(x) * double(y));
                host = std::fma(x, y, host);
              }
              if (with_epilogue) {
                exact += bias0[n];
                abs_sum += std::abs(bias0[n]);
                host += bias0[n];
              }
              worst = std::max(worst, std::abs(double(c[std::size_t(m) * N + n]) - exact) / abs_sum);
              worst_host = std::max(worst_host, std::abs(double(host) - exact) / abs_sum);
            }
          // The operands are taken to 2^-21 of themselves (8 u a product) and the tensor core truncates its
          // block sums, so at small K the kernel may read a few u above the host; one TF32 pass would read
          // ~2^-11 (4096 u) of the terms.
          const double bound = std::max(2 * worst_host, 32 * kU);
          INFO("M " << M << " N " << N << " K " << K << " A " << (ar ? "row" : "col") << " B " << (br ? "row" : "col") << " beta " << beta
                    << ": worst error " << worst << " (host fp32 " << worst_host << "), bound " << bound);
          CHECK(worst <= bound);
          // A's row sums: fp32 sums of the row's K entries plus the old value (the kernel's order differs from
          // the host's by the slices); untouched without the epilogue.
          double worst_rs = 0, worst_rs_host = 0;
          for (int m = 0; m < M; ++m) {
            double exact = rsum0[m], abs_sum = std::abs(exact);
            float host = rsum0[m];
            for (int k = 0; k < K; ++k) {
              exact += a_at(m, k);
              abs_sum += std::abs(a_at(m, k));
              host += a_at(m, k);
            }
            if (!with_epilogue) {
              CHECK(rs[m] == rsum0[m]);
              continue;
            }
            worst_rs = std::max(worst_rs, std::abs(double(rs[m]) - exact) / abs_sum);
            worst_rs_host = std::max(worst_rs_host, std::abs(double(host) - exact) / abs_sum);
          }
          INFO("row sums: worst error " << worst_rs << " (host fp32 " << worst_rs_host << ")");
          CHECK(worst_rs <= std::max(2 * worst_rs_host, 4 * kU));
        }
}

// If it failed: the split-K sum's order (of the product or of A's row sums) depended on something other
// than the shape (a race, atomics), so two training runs of the same seed would drift apart.
TEST_CASE("3xTF32 GEMM gives the same bits twice, with a split K", "[gpu]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: skipped"); return; }
  const int M = 128, N = 256, K = 6208;  // dW's shape at one run's n = 32 batch: split over blocks
  REQUIRE(vla::gpu::gemm_3xtf32_workspace_floats(M, N, K) > 0);
  std::mt19937 rng(5);
  DeviceBuffer A, B, C1(std::size_t(M) * N), C2(std::size_t(M) * N), work(vla::gpu::gemm_3xtf32_workspace_floats(M, N, K));
  DeviceBuffer r1(std::vector<float>(M, 0.f)), r2(std::vector<float>(M, 0.f));
  upload_random(A, std::size_t(M) * K, rng);
  upload_random(B, std::size_t(K) * N, rng);
  for (auto [c, r] : {std::pair{&C1, &r1}, std::pair{&C2, &r2}})
    check(vla::gpu::gemm_3xtf32(MatrixLayout::ColMajor, MatrixLayout::RowMajor, M, N, K, A.get(), B.get(), 0.f, c->get(),
                                vla::gpu::GemmEpilogue{nullptr, r->get()}, work.get(), work.size(), nullptr),
          "gemm_3xtf32");
  check(cudaDeviceSynchronize(), "sync");
  const auto c1 = download(C1, std::size_t(M) * N), c2 = download(C2, std::size_t(M) * N);
  CHECK(std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(float)) == 0);
  const auto s1 = download(r1, M), s2 = download(r2, M);
  CHECK(std::memcmp(s1.data(), s2.data(), s1.size() * sizeof(float)) == 0);
}

namespace {
// (B T) x (G H d) row-major -> G tensors (B, H, T, d) one after another: the head-major storage of
// gpu/gemm_3xtf32.hpp (G = groups).
std::vector<float> to_heads(const std::vector<float>& x, int T, int d, int cols, int groups = 1) {
  std::vector<float> y(x.size());
  const int rows = int(x.size()) / cols, hd = cols / groups, H = hd / d;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const int g = c / hd, cg = c % hd;
      y[std::size_t(g) * rows * hd + ((std::size_t(r / T) * H + cg / d) * T + r % T) * d + cg % d] = x[std::size_t(r) * cols + c];
    }
  return y;
}
}  // namespace

// If it failed: a head-major operand read from (or C written to) the wrong sequence, head or token (an
// offset's b, h, t or j; with q, k, v side by side, the wrong tensor g), the split-K reduction writing C
// dense, or the head-major variant rounding otherwise than the dense product: its contract is the same bits as
// the dense product of the permuted matrices, which this compares bit for bit (tokens T = 7 and 25, heads of 4
// and 32, one tensor or three, K split and not).
TEST_CASE("3xTF32 GEMM reads and writes head-major matrices in place, with the dense product's bits", "[gpu]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: skipped"); return; }
  using vla::gpu::GemmHeads;
  using vla::gpu::HeadMajor;
  const auto R = MatrixLayout::RowMajor, Cm = MatrixLayout::ColMajor;
  struct Case { int T, d, H, B, other, groups; };  // tokens N = B T, head-major width groups H d, the dense side `other`
  const Case cases[] = {{7, 4, 3, 4, 20, 1}, {25, 32, 4, 64, 128, 1}, {7, 4, 3, 4, 20, 3}, {25, 32, 4, 64, 128, 3}};
  std::mt19937 rng(11);
  for (const auto& [T, d, H, Bn, other, groups] : cases) {
    const int N = Bn * T, hd = groups * H * d;  // q, k, v side by side when groups = 3
    const HeadMajor hm{T, d, groups};
    // The training step's four head-major products: y = x W^T into heads (C), y = heads W^T (A row-major),
    // dW = dy_heads^T x (A column-major, a long K: split over blocks at N = 1600), and dW = x^T heads (B).
    struct Product { MatrixLayout la, lb; int M, Nc, K; bool a_heads, b_heads, c_heads; };
    const Product products[] = {{R, Cm, N, hd, other, false, false, true},
                                {R, Cm, N, other, hd, true, false, false},
                                {Cm, R, hd, other, N, true, false, false},
                                {Cm, R, other, hd, N, false, true, false}};
    for (const auto& pr : products) {
      const std::size_t a_n = std::size_t(pr.M) * pr.K, b_n = std::size_t(pr.K) * pr.Nc, c_n = std::size_t(pr.M) * pr.Nc;
      DeviceBuffer A, B, C, bias, rsum;
      const auto a = upload_random(A, a_n, rng), b = upload_random(B, b_n, rng), c0 = upload_random(C, c_n, rng);
      upload_random(bias, std::size_t(pr.Nc), rng);
      const auto rsum0 = upload_random(rsum, std::size_t(pr.M), rng);
      // The stored matrices' columns: a row-major A is M x K, a column-major one stored K x M; likewise B.
      const int a_cols = pr.la == R ? pr.K : pr.M, b_cols = pr.lb == R ? pr.Nc : pr.K;
      DeviceBuffer Ah(pr.a_heads ? to_heads(a, T, d, a_cols, groups) : a), Bh(pr.b_heads ? to_heads(b, T, d, b_cols, groups) : b),
          Ch(pr.c_heads ? to_heads(c0, T, d, pr.Nc, groups) : c0), rsum_h(rsum0);
      DeviceBuffer work(std::max<std::size_t>(1, vla::gpu::gemm_3xtf32_workspace_floats(pr.M, pr.Nc, pr.K)));
      const GemmHeads heads{pr.a_heads ? hm : HeadMajor{}, pr.b_heads ? hm : HeadMajor{}, pr.c_heads ? hm : HeadMajor{}};
      REQUIRE(vla::gpu::gemm_3xtf32_serves(pr.M, pr.Nc, pr.K, Ah.get(), Bh.get(), Ch.get(), pr.la, pr.lb, heads));
      for (const float beta : {0.f, 1.f}) {
        check(vla::gpu::gemm_3xtf32(pr.la, pr.lb, pr.M, pr.Nc, pr.K, A.get(), B.get(), beta, C.get(), {bias.get(), rsum.get()}, work.get(),
                                    work.size(), nullptr),
              "dense");
        check(vla::gpu::gemm_3xtf32(pr.la, pr.lb, pr.M, pr.Nc, pr.K, Ah.get(), Bh.get(), beta, Ch.get(), {bias.get(), rsum_h.get()}, work.get(),
                                    work.size(), nullptr, heads),
              "head-major");
        check(cudaDeviceSynchronize(), "sync");
        const auto dense = download(C, c_n), got = download(Ch, c_n);
        const auto want = pr.c_heads ? to_heads(dense, T, d, pr.Nc, groups) : dense;
        INFO("T " << T << " d " << d << " groups " << groups << " M " << pr.M << " N " << pr.Nc << " K " << pr.K << " heads a/b/c " << pr.a_heads << pr.b_heads
                  << pr.c_heads << " beta " << beta);
        CHECK(std::memcmp(got.data(), want.data(), c_n * sizeof(float)) == 0);
        const auto rs = download(rsum, pr.M), rs_h = download(rsum_h, pr.M);
        CHECK(std::memcmp(rs.data(), rs_h.data(), rs.size() * sizeof(float)) == 0);
      }
    }
  }
  // The contract: whole sequences and heads, heads of a multiple of 4.
  DeviceBuffer X(64 * 64);
  const HeadMajor hm{7, 4};
  CHECK(vla::gpu::gemm_3xtf32_serves(28, 12, 8, X.get(), X.get(), X.get(), R, R, {{}, {}, hm}));
  CHECK_FALSE(vla::gpu::gemm_3xtf32_serves(24, 12, 8, X.get(), X.get(), X.get(), R, R, {{}, {}, hm}));             // 24 rows: not whole sequences of 7
  CHECK_FALSE(vla::gpu::gemm_3xtf32_serves(28, 12, 8, X.get(), X.get(), X.get(), R, R, {{}, {}, HeadMajor{7, 2}}));  // heads of 2
  CHECK_FALSE(vla::gpu::gemm_3xtf32_serves(28, 12, 8, X.get(), X.get(), X.get(), R, R, {{}, {}, HeadMajor{7, 8}}));  // 12 columns: not whole heads of 8
  CHECK(vla::gpu::gemm_3xtf32_serves(8, 12, 28, X.get(), X.get(), X.get(), Cm, R, {hm, {}, {}}));                  // A stored 28 x 8: tokens are its rows
  CHECK_FALSE(vla::gpu::gemm_3xtf32_serves(28, 12, 8, X.get(), X.get(), X.get(), Cm, R, {hm, {}, {}}));            // stored 8 x 28
  CHECK(vla::gpu::gemm_3xtf32_serves(28, 36, 8, X.get(), X.get(), X.get(), R, R, {{}, {}, HeadMajor{7, 4, 3}}));      // 3 tensors of 12 columns
  CHECK_FALSE(vla::gpu::gemm_3xtf32_serves(28, 12, 8, X.get(), X.get(), X.get(), R, R, {{}, {}, HeadMajor{7, 4, 2}})); // 12 = 2 x 6: heads of 4 do not tile a tensor
}

// If it failed: a shape the kernel cannot read with float4s (or a missing workspace) would be launched and
// read out of bounds, instead of being refused so that the caller takes cuBLAS SGEMM.
TEST_CASE("3xTF32 GEMM refuses what its contract does not take, launching nothing", "[gpu]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: skipped"); return; }
  DeviceBuffer A(64 * 64), B(64 * 64), C(64 * 64);
  const auto R = MatrixLayout::RowMajor;
  CHECK_FALSE(vla::gpu::gemm_3xtf32_serves(6, 8, 8, A.get(), B.get(), C.get()));   // M not a multiple of 4
  CHECK_FALSE(vla::gpu::gemm_3xtf32_serves(8, 8, 0, A.get(), B.get(), C.get()));   // empty K
  CHECK_FALSE(vla::gpu::gemm_3xtf32_serves(8, 8, 8, A.get() + 1, B.get(), C.get()));  // A not 16-byte aligned
  CHECK(vla::gpu::gemm_3xtf32(R, R, 6, 8, 8, A.get(), B.get(), 0.f, C.get(), {}, nullptr, 0, nullptr) == cudaErrorInvalidValue);
  const int K = 1 << 14;  // split over blocks: a workspace is needed
  REQUIRE(vla::gpu::gemm_3xtf32_workspace_floats(64, 64, K) > 0);
  DeviceBuffer big(std::size_t(64) * K);
  const std::size_t need = vla::gpu::gemm_3xtf32_workspace_floats(64, 64, K);
  CHECK(vla::gpu::gemm_3xtf32(R, R, 64, 64, K, big.get(), big.get(), 0.f, C.get(), {}, nullptr, 0, nullptr) == cudaErrorInvalidValue);
  DeviceBuffer short_work(need - 4);  // one float4 short
  CHECK(vla::gpu::gemm_3xtf32(R, R, 64, 64, K, big.get(), big.get(), 0.f, C.get(), {}, short_work.get(), short_work.size(), nullptr) ==
        cudaErrorInvalidValue);
  CHECK(cudaGetLastError() == cudaSuccess);
}

// If it failed: the model would launch the kernel on a shape it cannot read with float4s or cannot grid
// (more than 65535 row tiles), or would send the training step's own shapes to SGEMM. Host logic alone: runs
// without a device.
TEST_CASE("3xTF32 GEMM's contract check takes the training shapes and refuses the rest", "[gemm]") {
  using vla::gpu::gemm_3xtf32_serves;
  const auto* p = reinterpret_cast<const float*>(std::uintptr_t{256});  // 16-byte aligned, never dereferenced
  for (const int n : {1600, 6208, 99328})  // a linear layer's three products at one run's and 16 runs' rows
    for (const auto& [in, out] : {std::pair{128, 384}, std::pair{128, 128}, std::pair{128, 256}, std::pair{256, 128}}) {
      CHECK(gemm_3xtf32_serves(n, out, in, p, p, p));
      CHECK(gemm_3xtf32_serves(out, in, n, p, p, p));
      CHECK(gemm_3xtf32_serves(n, in, out, p, p, p));
    }
  CHECK(gemm_3xtf32_serves(65535 * 64, 128, 128, p, p, p));
  CHECK_FALSE(gemm_3xtf32_serves(65535 * 64 + 4, 128, 128, p, p, p));  // one row tile too many
  CHECK_FALSE(gemm_3xtf32_serves(128, 2, 128, p, p, p));               // N not a multiple of 4 (a gate of 2 heads)
  CHECK_FALSE(gemm_3xtf32_serves(128, 128, 130, p, p, p));             // K not a multiple of 4
  CHECK_FALSE(gemm_3xtf32_serves(128, 128, 128, p + 2, p, p));         // A 8 bytes off
  CHECK_FALSE(gemm_3xtf32_serves(128, 128, 128, p, p, nullptr));       // no C
  // The workspace: none for a K of one slice, some for a long one (dW over one run's 1600 tokens).
  CHECK(vla::gpu::gemm_3xtf32_workspace_floats(1600, 128, 128) == 0);
  CHECK(vla::gpu::gemm_3xtf32_workspace_floats(128, 128, 1600) >= std::size_t(2) * (128 * 128 + 128));
}
