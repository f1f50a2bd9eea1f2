// The chunkwise-parallel VLA forward (gpu/chunked_vla_forward.cu) against Algorithm 1 in double (the CPU
// rule, core/rules/vla/forward.hpp) on fresh random inputs: several launch shapes, chunk lengths from 1 to
// 32, T a multiple of none of them, the refresh on and off, outputs poisoned with NaN before every run.
// Tagged [gpu]; passes with a warning and checks nothing where no CUDA device is visible (CI).
#include "core/rules/vla/chunked.hpp"
#include "gpu/chunked_vla_forward.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_query.hpp"
#include "tests/gpu/recurrent_reference.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace {

using namespace vla::gpu_test;

vla::gpu::RecurrentParams params(int refresh_period) {
  vla::gpu::RecurrentParams p;
  p.refresh_period = refresh_period;
  return p;
}

// One launch of the chunked kernel (chunk 0: the default) or, with chunk < 0, of the fused recurrent kernel.
std::vector<float> run_gpu(const Inputs& in, int chunk, const vla::gpu::RecurrentParams& p, int group = 0,
                           vla::ProductOperands products = vla::ProductOperands::Full) {
  using vla::gpu::DeviceBuffer;
  const Shape s = in.s;
  DeviceBuffer q(in.q), k(in.k), v(in.v), u(in.u), o(in.q.size());
  o.poison();
  vla::gpu::RecurrentTensors x;
  x.q = q.get(); x.k = k.get(); x.v = v.get(); x.u = u.get(); x.o = o.get();
  x.B = s.B; x.H = s.H; x.T = s.T; x.d = s.d;
  vla::gpu::check(chunk < 0 ? vla::gpu::recurrent_forward(vla::gpu::RecurrentKind::Vla, x, p) : vla::gpu::chunked_vla_forward(x, p, chunk, group, nullptr, nullptr, products),
                  "forward launch");
  vla::gpu::check(cudaDeviceSynchronize(), "forward (sync)");
  vla::gpu::check(cudaGetLastError(), "forward (last error)");
  return o.download();
}

Outputs run_cpu_vla(const Inputs& in, int refresh_period) {
  vla::MixerConfig cfg;
  cfg.mixer = "vla";
  cfg.penalty.refresh_period = refresh_period;
  return run_cpu(cfg, in);
}

// The CPU chunked form (core/rules/vla/chunked.hpp) in double over each sequence at chunk C, its products
// reading their operands as `ops` says: with Tf32, the emulation of the kernel's one-pass products.
std::vector<float> run_cpu_chunked(const Inputs& in, int refresh_period, int C, vla::ProductOperands ops) {
  const Shape s = in.s;
  std::vector<float> o(in.q.size());
  vla::VlaOptions opt = vla::VlaOptions::preset("vla");
  opt.penalty.refresh_period = refresh_period;
  for (int seq = 0; seq < s.B * s.H; ++seq) {
    const std::size_t base = std::size_t(seq) * s.T * s.d;
    const auto rows = [&](const std::vector<float>& x) {  // (T, d): the sequence's tokens as rows
      vla::Mat<double> m(s.T, s.d);
      for (int t = 0; t < s.T; ++t)
        for (int i = 0; i < s.d; ++i) m(t, i) = x[base + std::size_t(t) * s.d + i];
      return m;
    };
    const auto r = vla::vla_chunked<double>(vla::vla_features<double>(rows(in.q), rows(in.k), rows(in.u), opt), rows(in.v), opt, C, {},
                                            nullptr, ops);
    for (int t = 0; t < s.T; ++t)
      for (int i = 0; i < s.d; ++i) o[base + std::size_t(t) * s.d + i] = float(r.O(t, i));
  }
  return o;
}

bool all_finite(const std::vector<float>& x) {
  for (float e : x)
    if (!std::isfinite(e)) return false;
  return true;
}

}  // namespace

TEST_CASE("chunked VLA forward matches Algorithm 1 in double within the fp32 bound, every chunk length", "[gpu][chunked]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU kernel test is skipped"); return; }
  // If these fail, the chunkwise algebra (V1-V5 of docs/chunkwise-vla.md) or its chunk boundaries (the last
  // short chunk, the refresh steps, the clamp) differ from Algorithm 1, not merely its rounding.
  std::uint64_t seed = 2000;
  for (const Shape s : {Shape{2, 3, 67, 32}, Shape{3, 2, 150, 32}, Shape{1, 2, 1009, 32}})
    for (int period : {20, 0}) {
      const Inputs in = random_inputs(s, seed++);
      const Outputs cpu = run_cpu_vla(in, period);
      const double tol = fp32_bound(s);
      for (int chunk : {0, 1, 7, 16, 20, 32}) {
        const auto p = params(period);
        const std::vector<float> gpu = run_gpu(in, chunk, p);
        INFO("B=" << s.B << " H=" << s.H << " T=" << s.T << " refresh " << period << " chunk " << chunk << " (runs "
                  << vla::gpu::chunked_vla_chunk(chunk, p) << ") tol " << tol);
        REQUIRE(all_finite(gpu));  // every output written (the poison is NaN) and finite
        const double e = rel_err(gpu, cpu.o);
        WARN("chunked C=" << vla::gpu::chunked_vla_chunk(chunk, p) << " T=" << s.T << " refresh " << period << ": rel err " << e);
        CHECK(e <= tol);
      }
    }
}

TEST_CASE("chunked VLA forward with one-pass TF32 products rounds as the CPU emulation of that pass", "[gpu][chunked]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU kernel test is skipped"); return; }
  // Both errors are against Algorithm 1 in double: the kernel's with one-pass TF32 products, and the CPU
  // chunked form's in double with every product operand rounded to TF32 (core/product_operands.hpp), the
  // same products the kernel runs on its tensor cores. Two runs of one rounding model on the same inputs
  // differ only in which way single roundings fall (the kernel keeps its chains, group maps and sweeps in
  // fp32, the emulation sums in double), so the kernel's error may be at most 4x the emulation's. If that
  // fails, the kernel rounds worse than one TF32 rounding per operand explains: a fragment read wrong, an
  // operand rounded twice, a truncation building up along the accumulators. The lower check, 1/16 of the
  // emulation's, only has to tell one pass from the three of the full products, ~2^10 closer: if it fails,
  // `products` does not reach the kernels.
  std::uint64_t seed = 3100;
  for (const Shape s : {Shape{2, 3, 67, 32}, Shape{1, 2, 1009, 32}})
    for (int period : {20, 0}) {
      const Inputs in = random_inputs(s, seed++);
      const Outputs cpu = run_cpu_vla(in, period);
      const auto p = params(period);
      for (int chunk : {0, 7, 16}) {
        const int C = vla::gpu::chunked_vla_chunk(chunk, p);
        INFO("B=" << s.B << " H=" << s.H << " T=" << s.T << " refresh " << period << " C " << C);
        // The emulation runs the kernel's Algorithm 1: with full products it is the reference itself, to
        // the float outputs' rounding (2^-24 each side).
        REQUIRE(rel_err(run_cpu_chunked(in, period, C, vla::ProductOperands::Full), cpu.o) <= std::ldexp(1.0, -22));
        const double e_model = rel_err(run_cpu_chunked(in, period, C, vla::ProductOperands::Tf32), cpu.o);
        const std::vector<float> gpu = run_gpu(in, chunk, p, 0, vla::ProductOperands::Tf32);
        REQUIRE(all_finite(gpu));
        const double e = rel_err(gpu, cpu.o);
        WARN("tf32 products C=" << C << " T=" << s.T << " refresh " << period << ": rel err " << e << ", CPU emulation " << e_model);
        CHECK(e <= 4 * e_model);
        CHECK(e >= e_model / 16);
      }
    }
}

TEST_CASE("chunked VLA forward: the penalty chain's renormalised groups and the solved ones agree with Algorithm 1", "[gpu][chunked]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU kernel test is skipped"); return; }
  // The chain renormalises [X; Z] to [A; I] at every span-th group and leaves the groups between to
  // penalty_expand's solves. Group lengths whose spans (kChunkedVlaChainSegments / group) end inside the
  // sequence, so both kinds of group start and the products across a renormalisation are checked. A
  // failure here and not in the chunk-length test points at the chain's spans, not at the chunk algebra.
  const Shape s{1, 2, 3000, 32};
  const Inputs in = random_inputs(s, 4242);
  const double tol = fp32_bound(s);
  for (int period : {20, 0}) {
    const Outputs cpu = run_cpu_vla(in, period);
    const auto p = params(period);
    for (int group : {1, 16, 40, 64}) {
      const std::vector<float> gpu = run_gpu(in, 16, p, group);
      const int group_tokens = vla::gpu::chunked_vla_group_tokens(16, group, p, s.B * s.H, s.T);
      const int groups = (s.T + group_tokens - 1) / group_tokens;
      const int span = std::max(1, vla::gpu::kChunkedVlaChainSegments / group);
      INFO("refresh " << period << " group " << group << ": " << groups << " groups, renormalised every " << span);
      REQUIRE(groups > span);  // the shape exercises a renormalisation after the first group
      REQUIRE(all_finite(gpu));
      CHECK(rel_err(gpu, cpu.o) <= tol);
    }
  }
}

TEST_CASE("chunked VLA forward is the same function of each sequence whatever the launch shape", "[gpu][chunked]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU kernel test is skipped"); return; }
  // A warp owns one (sequence, group) and each chain one sequence, in a fixed operation order: sequence
  // (b, h) of a (B, H) launch must equal, bit for bit, the same sequence launched alone. A difference means
  // sequences share state or the result depends on scheduling (a race in the chains' block barriers).
  const Shape s{3, 2, 45, 32};
  const Inputs in = random_inputs(s, 91);
  const auto p = params(20);
  const std::vector<float> all = run_gpu(in, 16, p);
  for (int seq = 0; seq < s.B * s.H; ++seq) {
    const std::size_t n = std::size_t(s.T) * s.d;
    Inputs one{{1, 1, s.T, s.d}, {}, {}, {}, {}, {}};
    const auto slice = [&](const std::vector<float>& x) { return std::vector<float>(x.begin() + seq * n, x.begin() + (seq + 1) * n); };
    one.q = slice(in.q); one.k = slice(in.k); one.v = slice(in.v); one.u = slice(in.u);
    const std::vector<float> alone = run_gpu(one, 16, p);
    INFO("sequence " << seq);
    CHECK(std::equal(alone.begin(), alone.end(), all.begin() + seq * n));
  }
}

TEST_CASE("chunked VLA forward in the caller's workspace computes the bits of its own, launch after launch", "[gpu][chunked]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU kernel test is skipped"); return; }
  // A caller's workspace (chunked_vla_forward_workspace_floats floats) replaces the launch's own allocation:
  // poisoned with NaN before the first launch and reused by a second one on other inputs, it must give each
  // launch the bits the launch's own workspace gives. A difference means a kernel reads a workspace entry
  // that no kernel of the same launch wrote (the NaN, or the first launch's value, would reach an output),
  // or the size function and the launch disagree on the group and hence on the layout.
  using vla::gpu::DeviceBuffer;
  const Shape s{2, 3, 150, 32};
  const auto p = params(20);
  DeviceBuffer ws(vla::gpu::chunked_vla_forward_workspace_floats(s.B, s.H, s.T, 20, 0, p));
  REQUIRE(ws.size() > 0);
  ws.poison();
  for (std::uint64_t seed : {71u, 72u}) {
    const Inputs in = random_inputs(s, seed);
    DeviceBuffer q(in.q), k(in.k), v(in.v), u(in.u), o(in.q.size());
    o.poison();
    vla::gpu::RecurrentTensors x;
    x.q = q.get(); x.k = k.get(); x.v = v.get(); x.u = u.get(); x.o = o.get();
    x.B = s.B; x.H = s.H; x.T = s.T; x.d = s.d;
    vla::gpu::check(vla::gpu::chunked_vla_forward(x, p, 20, 0, nullptr, nullptr, vla::ProductOperands::Full, ws.get(), ws.size()),
                    "forward launch");
    vla::gpu::check(cudaDeviceSynchronize(), "forward (sync)");
    const std::vector<float> caller = o.download(), own = run_gpu(in, 20, p);
    INFO("inputs " << seed);
    CHECK(all_finite(caller));
    CHECK(std::memcmp(caller.data(), own.data(), own.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("chunked VLA forward split into parts on several streams leaves each sequence's outputs and states as alone", "[gpu][chunked]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU kernel test is skipped"); return; }
  // A launch of more sequences than one wave of the group kernels runs in parts, each a range of sequences
  // on its own stream with every pointer offset to its first sequence (chunked_vla_parts). Sequences at
  // the parts' edges must equal, bit for bit, the same sequence launched alone: outputs, the backward's
  // checkpoints and the chunk starts (whole per-sequence regions, poisoned before, so a write into a
  // neighbour's slots shows too). A difference means a part's offsets are wrong, or a part ran before the
  // launch's workspace existed or after it was freed (the streams' fork and join).
  using vla::gpu::DeviceBuffer;
  const auto p = params(20);
  const int chunk = 16;
  Shape s{64, 4, 45, 32};
  while (vla::gpu::chunked_vla_parts(chunk, 0, p, s.B * s.H, s.T, true) < 2 && s.B < 4096) s.B *= 2;
  const int seqs = s.B * s.H, parts = vla::gpu::chunked_vla_parts(chunk, 0, p, seqs, s.T, true);
  INFO(seqs << " sequences in " << parts << " parts");
  REQUIRE(parts >= 2);
  const Inputs in = random_inputs(s, 5151);
  const std::size_t per_o = std::size_t(s.T) * s.d, per_starts = vla::gpu::chunked_vla_chunk_starts_floats(1, 1, s.T, chunk, p);
  const std::size_t per_ckpt = std::size_t(vla::gpu::backward_checkpoint_offset(1, s.T, s.d, 0));
  struct Run { std::vector<float> o, starts, ckpt; };
  const auto run = [&](const Inputs& x_in) {
    const int n = x_in.s.B * x_in.s.H;
    DeviceBuffer q(x_in.q), k(x_in.k), v(x_in.v), u(x_in.u), o(x_in.q.size()), starts(per_starts * n), ckpt(per_ckpt * n);
    for (auto* b : {&o, &starts, &ckpt}) b->poison();
    vla::gpu::RecurrentTensors x;
    x.q = q.get(); x.k = k.get(); x.v = v.get(); x.u = u.get(); x.o = o.get(); x.checkpoints = ckpt.get();
    x.B = x_in.s.B; x.H = x_in.s.H; x.T = x_in.s.T; x.d = x_in.s.d;
    vla::gpu::check(vla::gpu::chunked_vla_forward(x, p, chunk, 0, nullptr, starts.get()), "forward launch");
    vla::gpu::check(cudaDeviceSynchronize(), "forward (sync)");
    return Run{o.download(), starts.download(), ckpt.download()};
  };
  const Run all = run(in);
  const auto same_bits = [](const std::vector<float>& a, std::size_t at, const std::vector<float>& b) {
    return std::memcmp(a.data() + at, b.data(), b.size() * sizeof(float)) == 0;
  };
  std::vector<int> edges{0, seqs - 1};
  for (int i = 1; i < parts; ++i) {  // the first sequence of part i and the last of part i - 1, where the parts are even
    const int first = (seqs / parts) * i;
    edges.push_back(first - 1);
    edges.push_back(first);
    edges.push_back(first + 1);
  }
  for (int seq : edges) {
    Inputs one{{1, 1, s.T, s.d}, {}, {}, {}, {}, {}};
    const auto slice = [&](const std::vector<float>& x) { return std::vector<float>(x.begin() + seq * per_o, x.begin() + (seq + 1) * per_o); };
    one.q = slice(in.q); one.k = slice(in.k); one.v = slice(in.v); one.u = slice(in.u);
    const Run alone = run(one);
    INFO("sequence " << seq);
    CHECK(same_bits(all.o, seq * per_o, alone.o));
    CHECK(same_bits(all.starts, seq * per_starts, alone.starts));
    CHECK(same_bits(all.ckpt, seq * per_ckpt, alone.ckpt));
  }
}

TEST_CASE("chunked VLA forward signals an fp32 overflow with NaN from its chunk on, never a plausible value", "[gpu][chunked]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU kernel test is skipped"); return; }
  // At step t0 of sequence 0, q and k of size 1e20 overflow ||phi(k)||^2 and phi(q)^T z in fp32. The CPU float
  // rule returns NaN from t0 on; the chunked kernel mixes a chunk's tokens in its products, so the NaN may
  // also reach the rows of t0's own chunk before t0 (the masked zeros of a product still multiply it), but
  // never a row of an earlier chunk, and never a finite value after t0. Sequence 1 must be untouched.
  const Shape s{2, 1, 50, 32};
  const int t0 = 27, chunk = 10;  // t0 in the chunk [20, 30) (refresh off)
  Inputs in = random_inputs(s, 17);
  for (int i = 0; i < s.d; ++i) in.q[std::size_t(t0) * s.d + i] = in.k[std::size_t(t0) * s.d + i] = 1e20f;
  const std::vector<float> gpu = run_gpu(in, chunk, params(0));
  const Outputs cpu = run_cpu_vla(in, 0);
  for (int t = 0; t < s.T; ++t) {
    bool nan = false, finite = true;
    for (int i = 0; i < s.d; ++i) {
      nan = nan || std::isnan(gpu[std::size_t(t) * s.d + i]);
      finite = finite && std::isfinite(gpu[std::size_t(t) * s.d + i]);
    }
    INFO("step " << t);
    if (t >= t0) CHECK(nan);
    else if (t < 20) CHECK(finite);
    else CHECK((nan || finite));
  }
  const std::size_t half = std::size_t(s.T) * s.d;
  const std::vector<float> gpu0(gpu.begin(), gpu.begin() + 20 * s.d), cpu0(cpu.o.begin(), cpu.o.begin() + 20 * s.d);
  CHECK(rel_err(gpu0, cpu0) <= fp32_bound(s));  // the chunks before the overflow are Algorithm 1's
  const std::vector<float> gpu1(gpu.begin() + half, gpu.end()), cpu1(cpu.o.begin() + half, cpu.o.end());
  CHECK(all_finite(gpu1));
  CHECK(rel_err(gpu1, cpu1) <= fp32_bound(s));
}

TEST_CASE("chunked VLA forward rejects what it does not implement instead of launching", "[gpu][chunked]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU kernel test is skipped"); return; }
  // Each of these must come back as cudaErrorInvalidValue with nothing launched (the poisoned output stays NaN).
  vla::gpu::DeviceBuffer buf(std::size_t(4) * 64), o(std::size_t(4) * 64);
  o.poison();
  vla::gpu::RecurrentTensors x;
  x.q = x.k = x.v = x.u = buf.get(); x.o = o.get();
  x.B = 1; x.H = 1; x.T = 4; x.d = 32;
  const vla::gpu::RecurrentParams p;
  for (int d : {16, 48, 64}) {
    vla::gpu::RecurrentTensors y = x;
    y.d = d;
    CHECK(vla::gpu::chunked_vla_forward(y, p) == cudaErrorInvalidValue);  // head widths without an instantiation
  }
  CHECK(vla::gpu::chunked_vla_forward(x, p, -1) == cudaErrorInvalidValue);
  CHECK(vla::gpu::chunked_vla_forward(x, p, vla::gpu::kChunkedVlaMaxChunk + 1) == cudaErrorInvalidValue);
  vla::gpu::RecurrentTensors no_u = x;
  no_u.u = nullptr;
  CHECK(vla::gpu::chunked_vla_forward(no_u, p) == cudaErrorInvalidValue);
  vla::gpu::RecurrentTensors empty = x;
  empty.T = 0;
  CHECK(vla::gpu::chunked_vla_forward(empty, p) == cudaErrorInvalidValue);
  vla::gpu::RecurrentParams no_knorm = p;  // vla-no-knorm: the kernels normalise k, so they must refuse
  no_knorm.normalise_key = false;
  CHECK(vla::gpu::chunked_vla_forward(x, no_knorm) == cudaErrorInvalidValue);
  vla::gpu::RecurrentParams big_eps = p;  // eps > 1: line 13's clamp could fire, which the chunk form does not do
  big_eps.eps = 2.f;
  CHECK(vla::gpu::chunked_vla_forward(x, big_eps) == cudaErrorInvalidValue);
  CHECK(vla::gpu::chunked_vla_forward(x, p, 0, 0, nullptr, nullptr, static_cast<vla::ProductOperands>(7)) == cudaErrorInvalidValue);
  // A caller's workspace one float smaller than the launch needs.
  const std::size_t need = vla::gpu::chunked_vla_forward_workspace_floats(1, 1, 4, 0, 0, p);
  REQUIRE(need > 0);
  vla::gpu::DeviceBuffer ws(need);
  CHECK(vla::gpu::chunked_vla_forward(x, p, 0, 0, nullptr, nullptr, vla::ProductOperands::Full, ws.get(), need - 1) == cudaErrorInvalidValue);
  CHECK(vla::gpu::chunked_vla_forward_workspace_floats(1, 1, 0, 0, 0, p) == 0);  // an invalid request sizes nothing
  vla::gpu::check(cudaDeviceSynchronize(), "sync");
  for (float e : o.download()) CHECK(std::isnan(e));
}
