// The fused VLA backward (gpu/recurrent_backward.cu) against the CPU reference backward in double
// (gpu/vla_backward_reference.hpp, itself checked against finite differences of the core rule in
// test_backward_reference.cpp), on fresh random inputs, several shapes, every output poisoned with
// NaN before the launch. Tagged [gpu]: passes with a warning and checks nothing where no CUDA device
// is visible (CI), because there is nothing to run the kernel on.
#include "gpu/cuda_check.hpp"
#include "gpu/device_query.hpp"
#include "gpu/recurrent_backward.hpp"
#include "gpu/vla_backward_reference.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <random>

namespace {

struct Shape { int B, H, T, d; };

// ||a - b|| / ||b||; a NaN anywhere gives NaN, which fails every bound.
double rel_err(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double e = double(a[i]) - b[i];
    num += e * e;
    den += b[i] * b[i];
  }
  return std::sqrt(num) / std::sqrt(den);
}

// Tolerance from fp32, as the forward's: every step is a few d-term dot products (error <= d u,
// u = 2^-24) and the states carry each step's rounding into all later (and, in the reverse pass,
// all earlier) steps, so the worst case grows as T d u. The same algorithm run in float on the CPU
// (vla_backward<float> vs <double>) measures 1e-7 .. 7e-7 at these shapes, far inside it.
double fp32_bound(const Shape& s) { return double(s.T) * s.d * std::ldexp(1.0, -24); }

// (B, H, T, d) buffers: q, k, v, u, dout drawn N(0, 1) from `seed`; returns the four GPU gradients.
struct Case {
  Shape s;
  std::vector<float> in[5];  // q, k, v, u, dout
};

Case random_case(Shape s, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  Case c{s, {}};
  for (auto& x : c.in) {
    x.resize(std::size_t(s.B) * s.H * s.T * s.d);
    for (float& e : x) e = n(gen);
  }
  return c;
}

std::vector<std::vector<float>> run_gpu(const Case& c) {
  using vla::gpu::DeviceBuffer;
  const Shape s = c.s;
  DeviceBuffer q(c.in[0]), k(c.in[1]), v(c.in[2]), u(c.in[3]), dout(c.in[4]);
  const std::size_t n = c.in[0].size();
  DeviceBuffer dq(n), dk(n), dv(n), du(n), ws(vla::gpu::recurrent_backward_workspace_floats(s.B, s.H, s.T, s.d));
  for (auto* b : {&dq, &dk, &dv, &du, &ws}) b->poison();
  vla::gpu::RecurrentTensors x;
  x.q = q.get(); x.k = k.get(); x.v = v.get(); x.u = u.get();
  x.B = s.B; x.H = s.H; x.T = s.T; x.d = s.d;
  vla::gpu::RecurrentGrads g;
  g.dout = dout.get(); g.dq = dq.get(); g.dk = dk.get(); g.dv = dv.get(); g.du = du.get();
  vla::gpu::check(vla::gpu::recurrent_backward(vla::gpu::RecurrentKind::Vla, x, g, {}, ws.get()), "recurrent_backward launch");
  vla::gpu::check(cudaDeviceSynchronize(), "recurrent_backward (sync)");
  vla::gpu::check(cudaGetLastError(), "recurrent_backward (last error)");
  return {dq.download(), dk.download(), dv.download(), du.download()};
}

// The reference on every (b, h) sequence, in double on the same fp32-valued inputs.
std::vector<std::vector<double>> run_reference(const Case& c) {
  const Shape s = c.s;
  const std::size_t n = std::size_t(s.T) * s.d;
  std::vector<std::vector<double>> r(4, std::vector<double>(c.in[0].size()));
  for (std::size_t seq = 0; seq < std::size_t(s.B) * s.H; ++seq) {
    std::vector<double> in[5], o, gq, gk, gv, gu;
    for (int a = 0; a < 5; ++a) in[a].assign(c.in[a].begin() + seq * n, c.in[a].begin() + (seq + 1) * n);
    vla::gpu::ref::vla_backward<double>(s.T, s.d, in[0], in[1], in[2], in[3], in[4], o, gq, gk, gv, gu);
    for (int a = 0; a < 4; ++a) {
      const auto& gsrc = a == 0 ? gq : a == 1 ? gk : a == 2 ? gv : gu;
      std::copy(gsrc.begin(), gsrc.end(), r[a].begin() + seq * n);
    }
  }
  return r;
}


void check_shapes(const std::vector<Shape>& shapes, std::uint64_t seed) {
  const char* names[] = {"dq_raw", "dk_raw", "dv", "du_raw"};
  for (const Shape& s : shapes) {
    const Case c = random_case(s, seed++);  // fresh inputs per shape
    const auto gpu = run_gpu(c);
    const auto ref = run_reference(c);
    const double tol = fp32_bound(s);
    for (int a = 0; a < 4; ++a) {
      INFO(names[a] << " B=" << s.B << " H=" << s.H << " T=" << s.T << " d=" << s.d << " tol=" << tol);
      bool finite = true;  // every element written (the poison is NaN) and finite
      for (float x : gpu[a]) finite = finite && std::isfinite(x);
      REQUIRE(finite);
      // A failure means the kernel differentiates a different function than the reference (a wrong
      // adjoint term, a wrong chunk / checkpoint index, a race on a shared matrix), not rounding.
      const double e = rel_err(gpu[a], ref[a]);
      WARN("vla backward " << names[a] << " d=" << s.d << " T=" << s.T << ": rel err " << e << " (bound " << tol << ")");
      CHECK(e <= tol);
    }
  }
}

}  // namespace

TEST_CASE("fused VLA backward matches the double reference backward within the fp32 bound", "[gpu][bwd-full]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU kernel test is skipped"); return; }
  // T around the checkpoint chunk (32): shorter than one chunk, an exact multiple, a ragged tail;
  // all but the first cross the refresh step t + 1 = 20. d in {16, 32, 64}.
  check_shapes({{2, 3, 13, 16}, {3, 2, 64, 16}, {2, 2, 100, 32}, {1, 3, 77, 32}, {2, 1, 70, 64}, {1, 2, 96, 64}}, 500);
}

TEST_CASE("fused VLA backward, small shapes (the sanitizers' racecheck run)", "[gpu]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU kernel test is skipped"); return; }
  // Same check as above on shapes small enough for racecheck (which instruments every shared access):
  // still two chunks and a refresh step at each d.
  check_shapes({{1, 2, 40, 16}, {2, 1, 37, 32}, {1, 1, 35, 64}}, 700);
}

TEST_CASE("fused VLA backward is the same function of each sequence whatever the launch shape", "[gpu]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU kernel test is skipped"); return; }
  // One block per (b, h) with its own workspace slice and a fixed operation order: sequence (b, h)
  // of a (B, H) launch must equal, bit for bit, the same sequence launched alone. A difference means
  // blocks share scratch (a wrong workspace offset) or the result depends on scheduling (a race).
  for (int d : {16, 32, 64}) {
    const Shape s{2, 2, 45, d};
    const Case all = random_case(s, 900 + d);
    const auto g_all = run_gpu(all);
    const std::size_t n = std::size_t(s.T) * d;
    for (std::size_t seq = 0; seq < 4; ++seq) {
      Case one{{1, 1, s.T, d}, {}};
      for (int a = 0; a < 5; ++a) one.in[a].assign(all.in[a].begin() + seq * n, all.in[a].begin() + (seq + 1) * n);
      const auto g_one = run_gpu(one);
      for (int a = 0; a < 4; ++a) {
        INFO("d=" << d << " seq=" << seq << " gradient " << a);
        CHECK(std::equal(g_one[a].begin(), g_one[a].end(), g_all[a].begin() + seq * n));
      }
    }
  }
}

TEST_CASE("fused VLA backward rejects what it does not implement instead of launching", "[gpu]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU kernel test is skipped"); return; }
  vla::gpu::DeviceBuffer buf(4 * 128);
  vla::gpu::RecurrentTensors x;
  x.q = x.k = x.v = x.u = buf.get();
  x.B = 1; x.H = 1; x.T = 4; x.d = 128;  // d = 128: the backward's four d x d shared matrices do not fit
  vla::gpu::RecurrentGrads g;
  g.dout = buf.get(); g.dq = g.dk = g.dv = g.du = buf.get();
  CHECK(vla::gpu::recurrent_backward(vla::gpu::RecurrentKind::Vla, x, g, {}, buf.get()) == cudaErrorInvalidValue);
  x.d = 32;
  CHECK(vla::gpu::recurrent_backward(vla::gpu::RecurrentKind::Linear, x, g, {}, buf.get()) == cudaErrorInvalidValue);
}
