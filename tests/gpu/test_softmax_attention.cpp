// The GPU causal softmax attention (gpu/softmax_attention.cu: cuBLAS products + fused row kernels)
// against the CPU in double: the forward against the rule itself (core/rules/softmax/forward.hpp through
// SoftmaxRule<Precision<double>>), the backward against core/rules/softmax/adjoint.hpp in double, on
// fresh random inputs at several shapes, with one query chunk and with many (ragged) chunks, every
// output NaN-poisoned before each run. [gpu] cases pass with a warning where no CUDA device is visible.
#include "core/rules/softmax/rule.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_query.hpp"
#include "gpu/softmax_attention.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

namespace {

using vla::gpu::DeviceBuffer;

struct Shape { int B, H, T, d; };

struct Inputs {
  Shape s;
  std::vector<float> q, k, v, dout;  // (B, H, T, d)
};

Inputs random_inputs(Shape s, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  const std::size_t N = std::size_t(s.B) * s.H * s.T * s.d;
  Inputs in{s, std::vector<float>(N), std::vector<float>(N), std::vector<float>(N), std::vector<float>(N)};
  for (auto* x : {&in.q, &in.k, &in.v, &in.dout})
    for (float& e : *x) e = n(gen);
  return in;
}

// A cuBLAS handle in the toolkit's math mode (plain fp32, no TF32), destroyed on scope exit.
struct Blas {
  cublasHandle_t h = nullptr;
  Blas() {
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate failed");
    cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
  }
  ~Blas() { cublasDestroy(h); }
};

struct Outputs { std::vector<float> o, dq, dk, dv; };

// Forward and backward on the GPU with a workspace budget of `chunk` query rows (0 = the default
// plan); every output poisoned (all NaN) first, every CUDA call checked.
Outputs run_gpu(const Inputs& in, int chunk) {
  const Shape s = in.s;
  Blas blas;
  DeviceBuffer q(in.q), k(in.k), v(in.v), dout(in.dout), o(in.q.size()), dq(in.q.size()), dk(in.q.size()), dv(in.q.size());
  for (auto* b : {&o, &dq, &dk, &dv}) b->poison();
  const auto plan = chunk ? vla::gpu::softmax_attention_plan(s.B, s.H, s.T, 2 * std::size_t(s.B) * s.H * s.T * chunk)
                          : vla::gpu::softmax_attention_plan(s.B, s.H, s.T);
  if (chunk) REQUIRE(plan.chunk == chunk);
  DeviceBuffer ws(plan.workspace_floats);
  ws.poison();  // the row kernels must not read a score they did not compute
  const vla::gpu::AttentionInputs x{q.get(), k.get(), v.get(), s.B, s.H, s.T, s.d};
  vla::gpu::softmax_attention_forward(blas.h, x, o.get(), plan, ws.get());
  vla::gpu::softmax_attention_backward(blas.h, x, dout.get(), dq.get(), dk.get(), dv.get(), plan, ws.get());
  vla::gpu::check(cudaDeviceSynchronize(), "softmax attention (sync)");
  vla::gpu::check(cudaGetLastError(), "softmax attention (last error)");
  return {o.download(), dq.download(), dk.download(), dv.download()};
}

// The CPU in double on the same fp32-valued inputs: the rule's step for o, softmax_head_backward for
// the gradients, head by head.
Outputs run_cpu(const Inputs& in) {
  const Shape s = in.s;
  using P = vla::Precision<double>;
  const vla::SoftmaxRule<P> rule;
  Outputs r{std::vector<float>(in.q.size()), std::vector<float>(in.q.size()), std::vector<float>(in.q.size()),
            std::vector<float>(in.q.size())};
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.H; ++h) {
      const std::size_t base = (std::size_t(b) * s.H + h) * s.T * s.d;
      vla::Mat<double> q(s.T, s.d), k(s.T, s.d), v(s.T, s.d), dO(s.T, s.d), dq(s.T, s.d), dk(s.T, s.d), dv(s.T, s.d);
      for (int t = 0; t < s.T; ++t)
        for (int i = 0; i < s.d; ++i) {
          const std::size_t e = base + std::size_t(t) * s.d + i;
          q(t, i) = in.q[e]; k(t, i) = in.k[e]; v(t, i) = in.v[e]; dO(t, i) = in.dout[e];
        }
      auto st = rule.init(1, s.d);
      vla::HeadInputs<double> hin;
      vla::Mat<double> out;
      for (int t = 0; t < s.T; ++t) {
        hin.q = q.row(t).transpose(); hin.k = k.row(t).transpose(); hin.v = v.row(t).transpose();
        rule.step(st, hin, out, nullptr);
        for (int i = 0; i < s.d; ++i) r.o[base + std::size_t(t) * s.d + i] = float(out(i, 0));
      }
      vla::softmax_head_backward<double>(q, k, v, dO, dq, dk, dv);
      for (int t = 0; t < s.T; ++t)
        for (int i = 0; i < s.d; ++i) {
          const std::size_t e = base + std::size_t(t) * s.d + i;
          r.dq[e] = float(dq(t, i)); r.dk[e] = float(dk(t, i)); r.dv[e] = float(dv(t, i));
        }
    }
  return r;
}

// ||a - b|| / ||b||; a NaN anywhere gives NaN, which fails every bound.
double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double e = double(a[i]) - double(b[i]);
    num += e * e;
    den += double(b[i]) * double(b[i]);
  }
  return std::sqrt(num) / std::sqrt(den);
}

// Tolerance from fp32 (u = 2^-24). A logit q.k/sqrt(d) is a d-term dot product: absolute error
// <= gamma_d |q| |k| / sqrt(d) ~ d u sqrt(d) for unit-variance inputs, which exp turns into a relative
// error of every P_ts (twice: numerator and normaliser); the sums over keys add gamma_T. So the forward's
// worst case is (T + 2 d^{3/2}) u relative to o. The backward chains one more level of the same kind
// (dP = do.v, then sums of length T for dq, dk, dv): twice that. The double reference adds nothing at
// this scale. Measured on the CPU float path at these shapes: 1.5e-7 .. 7.5e-7, well inside.
double fwd_bound(const Shape& s) { return (s.T + 2.0 * s.d * std::sqrt(double(s.d))) * std::ldexp(1.0, -24); }
double bwd_bound(const Shape& s) { return 2.0 * fwd_bound(s); }

const Shape kShapes[] = {{2, 3, 67, 16}, {3, 2, 150, 32}, {1, 2, 100, 64}, {2, 1, 80, 128}};

bool no_device() {
  if (vla::gpu::device_count() > 0) return false;
  WARN("no CUDA device visible: the GPU softmax attention test is skipped");
  return true;
}

}  // namespace

// If any of these fail, the GPU computes a different function than eq. 2 / its backward (wrong scale,
// mask off by one, a chunk's key range or offset wrong, a transposed GEMM operand), not a rounding
// difference: such errors are O(1), the bound is ~1e-5 .. 2e-4, and fp32 lands near 1e-7.
TEST_CASE("GPU softmax attention (forward and backward) matches the CPU in double within the fp32 bound", "[gpu][softmax-attention]") {
  if (no_device()) return;
  std::uint64_t seed = 500;
  for (const Shape& s : kShapes) {
    const Inputs in = random_inputs(s, seed++);
    const Outputs cpu = run_cpu(in);
    // chunk 0: the default plan (one chunk at these sizes); 16 and 7: many chunks, the last one ragged.
    for (int chunk : {0, 16, 7}) {
      const Outputs gpu = run_gpu(in, chunk);
      INFO("B=" << s.B << " H=" << s.H << " T=" << s.T << " d=" << s.d << " chunk=" << chunk);
      const double eo = rel_err(gpu.o, cpu.o), eq = rel_err(gpu.dq, cpu.dq), ek = rel_err(gpu.dk, cpu.dk), ev = rel_err(gpu.dv, cpu.dv);
      WARN("softmax d=" << s.d << " T=" << s.T << " chunk=" << chunk << ": rel err o " << eo << " dq " << eq << " dk " << ek << " dv " << ev
                        << " (bounds " << fwd_bound(s) << ", " << bwd_bound(s) << ")");
      CHECK(eo <= fwd_bound(s));
      CHECK(eq <= bwd_bound(s));
      CHECK(ek <= bwd_bound(s));
      CHECK(ev <= bwd_bound(s));
    }
  }
}

// A NaN input must reach exactly the outputs that depend on it (causality): a NaN key at position
// s0 of one head poisons o_t for t >= s0 of that head only. If earlier rows or other heads turned NaN
// the mask or the head offsets would be wrong; if later rows stayed finite, the softmax would be
// hiding a NaN (e.g. a max that skips it), so a broken input could pass unnoticed.
TEST_CASE("GPU softmax attention propagates a NaN key to exactly the causally later outputs", "[gpu][softmax-attention]") {
  if (no_device()) return;
  const Shape s{2, 2, 40, 32};
  Inputs in = random_inputs(s, 9);
  const int s0 = 17, head = 1 * s.H + 0;  // (b, h) = (1, 0)
  in.k[(std::size_t(head) * s.T + s0) * s.d + 3] = std::nanf("");
  for (int chunk : {0, 8}) {
    const Outputs gpu = run_gpu(in, chunk);
    bool ok = true;
    for (int bh = 0; bh < s.B * s.H; ++bh)
      for (int t = 0; t < s.T; ++t)
        for (int i = 0; i < s.d; ++i) {
          const bool nan = std::isnan(gpu.o[(std::size_t(bh) * s.T + t) * s.d + i]);
          ok = ok && nan == (bh == head && t >= s0);
        }
    INFO("chunk " << chunk);
    CHECK(ok);
  }
}

// Bad arguments are rejected before any device work (host code only: CI runs this without a GPU).
// No exception would let a caller launch GEMMs over a workspace too small for the plan (out of bounds).
TEST_CASE("softmax attention plan and launchers reject bad arguments, naming them", "[softmax-attention]") {
  using vla::gpu::softmax_attention_plan;
  CHECK_THROWS_WITH(softmax_attention_plan(0, 1, 8), Catch::Contains("B = 0"));
  CHECK_THROWS_WITH(softmax_attention_plan(1, 1, 0), Catch::Contains("T = 0"));
  CHECK_THROWS_WITH(softmax_attention_plan(1, 2, 100, 399), Catch::Contains("budget"));  // one row needs 2*2*100 floats
  const auto p = softmax_attention_plan(2, 3, 100, 2 * 2 * 3 * 100 * 16);
  CHECK(p.chunk == 16);
  CHECK(p.workspace_floats == std::size_t(2 * 2 * 3 * 100 * 16));
  CHECK(softmax_attention_plan(2, 3, 100).chunk == 100);  // small problems: one chunk
  // The launchers validate before touching the handle or the pointers (never dereferenced here).
  float dummy[4];
  vla::gpu::AttentionInputs x{dummy, dummy, dummy, 2, 3, 200, 16};  // T = 200 > the plan's T = 100
  CHECK_THROWS_WITH(vla::gpu::softmax_attention_forward(nullptr, x, dummy, p, dummy), Catch::Contains("plan.workspace_floats"));
  x.T = 100;
  x.k = nullptr;
  CHECK_THROWS_WITH(vla::gpu::softmax_attention_forward(nullptr, x, dummy, p, dummy), Catch::Contains("q, k and v"));
  x.k = dummy;
  CHECK_THROWS_WITH(vla::gpu::softmax_attention_backward(nullptr, x, dummy, dummy, nullptr, dummy, p, dummy), Catch::Contains("dq, dk and dv"));
}
