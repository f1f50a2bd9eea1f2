// The training step's reductions (gpu/train/kernels.hpp) against sums in double on the host, at shapes
// that take one row split and several (the parity tests of test_gpu_train.cpp use small batches, which
// take one): the bias and LayerNorm gain/bias column sums, the token-embedding gradient from the
// positions grouped by token, the per-head blocks of a dense weight gradient.
#include "gpu/cuda_check.hpp"
#include "gpu/device_query.hpp"
#include "gpu/train/kernels.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace {

using vla::gpu::DeviceBuffer;
using vla::gpu::check;
namespace tk = vla::gpu::train;

constexpr double kU = 5.9604644775390625e-08;  // fp32 unit roundoff

std::vector<float> random_floats(std::size_t n, std::mt19937& rng, float lo = -1.f, float hi = 1.f) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> x(n);
  for (auto& v : x) v = u(rng);
  return x;
}

// |float sum - exact| of n terms in any order is at most (n - 1) u sum |terms| (to first order); a missed,
// doubled or misplaced row is an O(1) error of one term, far above it for these sizes.
void check_sum(float got, double exact, double abs_sum, long long n, const char* what, long long j) {
  INFO(what << " column " << j << ": got " << got << ", exact " << exact);
  CHECK(std::abs(double(got) - exact) <= double(n) * kU * abs_sum + 1e-30);
}

}  // namespace

// If it failed: rows lost or counted twice at a split's edge (ragged N, N below one split's minimum), a
// column tile's edge (m not a multiple of 32), the gain's product taken with the wrong xhat, or a sum that
// overwrites db and dg instead of adding into them; or two launches of the same inputs differ in bits.
TEST_CASE("column sums and LayerNorm parameter gradients equal double sums, with one row split or several", "[gpu]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: skipped"); return; }
  std::mt19937 rng(11);
  struct Shape { int N, m; };
  for (const auto [N, m] : {Shape{13, 5}, Shape{104, 32}, Shape{1040, 32}, Shape{1600, 128}, Shape{25601, 130}, Shape{64, 3328}}) {
    const std::size_t nm = std::size_t(N) * m;
    const std::vector<float> y = random_floats(nm, rng), xhat = random_floats(nm, rng, -2.f, 2.f), db0 = random_floats(m, rng),
                             dg0 = random_floats(m, rng), g = random_floats(m, rng), rstd = random_floats(N, rng, 0.5f, 2.f);
    DeviceBuffer dY(y), X(xhat), DB(db0), DG(dg0), DB2(db0), G(g), R(rstd), dX(nm);
    DeviceBuffer scratch(std::max<std::size_t>(1, tk::column_sums_scratch_floats(N, m)));
    check(tk::column_sums(dY.get(), N, m, DB.get(), scratch.get(), nullptr), "column_sums");
    check(tk::layernorm_backward(dY.get(), G.get(), X.get(), R.get(), N, m, dX.get(), false, DG.get(), DB2.get(), scratch.get(), nullptr),
          "layernorm_backward");
    check(cudaDeviceSynchronize(), "sync");
    const std::vector<float> db = DB.download(), db2 = DB2.download(), dg = DG.download();
    for (int j = 0; j < m; ++j) {
      double s = db0[j], sa = std::abs(db0[j]), t = dg0[j], ta = std::abs(dg0[j]);
      for (int n = 0; n < N; ++n) {
        const double v = y[std::size_t(n) * m + j], p = v * double(xhat[std::size_t(n) * m + j]);
        s += v; sa += std::abs(v); t += p; ta += std::abs(p);
      }
      check_sum(db[j], s, sa, N + 1, "column_sums", j);
      check_sum(db2[j], s, sa, N + 1, "LayerNorm bias gradient", j);
      check_sum(dg[j], t, ta, 2 * (N + 1), "LayerNorm gain gradient", j);  // each product rounds once more
    }
    // The same launch again from the same start: the same bits (a fixed order, no atomics).
    DeviceBuffer again(db0);
    check(tk::column_sums(dY.get(), N, m, again.get(), scratch.get(), nullptr), "column_sums again");
    check(cudaDeviceSynchronize(), "sync");
    const std::vector<float> db_again = again.download();
    CHECK(std::memcmp(db.data(), db_again.data(), m * sizeof(float)) == 0);
  }
}

// If it failed: a token's rows summed from the wrong positions (the grouping's offsets shifted by one), a
// token with no rows touched, or the gradient overwritten instead of added into.
TEST_CASE("the token-embedding gradient from positions grouped by token equals the double sum", "[gpu]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: skipped"); return; }
  std::mt19937 rng(5);
  const int N = 3001, d = 40, V = 128;
  std::vector<int> tokens(N);
  std::uniform_int_distribution<int> pick(0, V / 2);  // half the vocabulary never occurs
  for (auto& t : tokens) t = 2 * pick(rng) % V;
  std::vector<int> ids(N + V + 1, 0);  // positions (N), then starts (V + 1)
  int* positions = ids.data();
  int* starts = ids.data() + N;
  for (int n = 0; n < N; ++n) ++starts[tokens[n] + 1];
  for (int v = 0; v < V; ++v) starts[v + 1] += starts[v];
  std::vector<int> next(starts, starts + V);
  for (int n = 0; n < N; ++n) positions[next[tokens[n]]++] = n;
  const std::vector<float> dx = random_floats(std::size_t(N) * d, rng), e0 = random_floats(std::size_t(V) * d, rng);
  DeviceBuffer dX(dx), dE(e0), Ids(ids.size());
  check(cudaMemcpy(Ids.get(), ids.data(), ids.size() * sizeof(int), cudaMemcpyHostToDevice), "upload ids");
  const int* dids = reinterpret_cast<const int*>(Ids.get());
  check(tk::embed_backward_tokens(dids, dids + N, dX.get(), d, V, dE.get(), nullptr), "embed_backward_tokens");
  check(cudaDeviceSynchronize(), "sync");
  const std::vector<float> e = dE.download();
  for (int v = 0; v < V; ++v)
    for (int j = 0; j < d; ++j) {
      double s = e0[std::size_t(v) * d + j], sa = std::abs(s);
      long long count = 1;
      for (int n = 0; n < N; ++n)
        if (tokens[n] == v) { s += dx[std::size_t(n) * d + j]; sa += std::abs(dx[std::size_t(n) * d + j]); ++count; }
      check_sum(e[std::size_t(v) * d + j], s, sa, count, "token gradient", v * d + j);
    }
}

// If it failed: a head's block taken from the wrong rows or columns (transposed, or from another head's
// pair), or written instead of added.
TEST_CASE("a per-head weight gradient's blocks come from the dense product's diagonal", "[gpu]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: skipped"); return; }
  std::mt19937 rng(3);
  const int H = 3, dh = 5, hd = H * dh;
  const std::vector<float> full = random_floats(std::size_t(hd) * hd, rng), out0 = random_floats(std::size_t(H) * dh * dh, rng);
  DeviceBuffer F(full), O(out0);
  check(tk::add_diagonal_blocks(F.get(), H, dh, O.get(), nullptr), "add_diagonal_blocks");
  check(cudaDeviceSynchronize(), "sync");
  const std::vector<float> o = O.download();
  for (int h = 0; h < H; ++h)
    for (int r = 0; r < dh; ++r)
      for (int c = 0; c < dh; ++c) {
        const std::size_t i = (std::size_t(h) * dh + r) * dh + c;
        // row-major full: element (row h dh + r, column h dh + c)
        CHECK(o[i] == out0[i] + full[std::size_t(h * dh + r) * hd + std::size_t(h * dh + c)]);
      }
}

// If it failed: VLA's u = W_u^h k^h, taken as one dense product with the block-diagonal matrix, would mix
// heads (a block off the diagonal, or one not zeroed) or read a head's block transposed.
TEST_CASE("the block-diagonal matrix holds each head's block on the diagonal and zeros elsewhere", "[gpu]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: skipped"); return; }
  std::mt19937 rng(4);
  const int H = 3, dh = 5, hd = H * dh;
  const std::vector<float> blocks = random_floats(std::size_t(H) * dh * dh, rng);
  DeviceBuffer Bl(blocks), W(random_floats(std::size_t(hd) * hd, rng));  // W starts as noise: every entry must be written
  check(tk::block_diagonal(Bl.get(), H, dh, W.get(), nullptr), "block_diagonal");
  check(cudaDeviceSynchronize(), "sync");
  const std::vector<float> w = W.download();
  for (int row = 0; row < hd; ++row)
    for (int col = 0; col < hd; ++col) {
      const int h = row / dh;
      const float want = col / dh == h ? blocks[(std::size_t(h) * dh + row % dh) * dh + col % dh] : 0.f;
      CHECK(w[std::size_t(row) * hd + col] == want);
    }
}
