// The fused backward kernels (gpu/recurrent_backward.cu: VLA, linear attention, DeltaNet) and VLA's
// group-parallel backwards (vla_group_backward, [group-bwd]; chunked_vla_backward in the chunk form,
// [chunk-bwd]) against the core head backward in double
// (core/model/head.hpp: the rules' own adjoints, core/rules/<rule>/adjoint.hpp, checked against finite
// differences of the core rules in tests/train/head_backward_test.cpp), on fresh random inputs, several
// shapes, every output poisoned with NaN before the launch. Tagged [gpu] (and [bwd], what gpu/bwd-check.sh
// runs): passes with a warning and checks nothing where no CUDA device is visible (CI), because there is
// nothing to run the kernel on.
#include "core/model/head.hpp"
#include "core/rules/gpu_support.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_query.hpp"
#include "gpu/chunked_vla_backward.hpp"
#include "gpu/chunked_vla_forward.hpp"
#include "gpu/recurrent_backward.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <string>

namespace {

using vla::gpu::RecurrentKind;

struct Shape { int B, H, T, d; };

// ||a - b|| / ||b||; a NaN anywhere gives NaN, which fails every bound.
template <class A> double rel_err(const std::vector<A>& a, const std::vector<double>& b) {
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
// (the reference in float vs in double) measured 1e-7 .. 7e-7 at these shapes, far inside it.
double fp32_bound(const Shape& s) { return double(s.T) * s.d * std::ldexp(1.0, -24); }

// (B, H, T, d) buffers: q, k, v, u, dout drawn N(0, 1) from `seed`; returns the four GPU gradients.
struct Case {
  Shape s;
  std::vector<float> in[5];  // q, k, v, u, dout: (B, H, T, d)
  std::vector<float> gate;   // (B, H, T): DeltaNet's gate logits
};

Case random_case(Shape s, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  Case c{s, {}, {}};
  for (auto& x : c.in) {
    x.resize(std::size_t(s.B) * s.H * s.T * s.d);
    for (float& e : x) e = n(gen);
  }
  c.gate.resize(std::size_t(s.B) * s.H * s.T);
  for (float& e : c.gate) e = n(gen);
  return c;
}

// The kernel and its parameters from the mixer's GPU trait (core/rules/<rule>/gpu.hpp), as training
// takes them: the reference (run_reference) is the same rule with the same options.
vla::GpuKernel kernel_of(const std::string& mixer) {
  vla::MixerConfig cfg;
  cfg.mixer = mixer;
  const vla::GpuKernel k = vla::gpu_kernel_of(cfg);
  REQUIRE(k.path == vla::GpuPath::Recurrent);
  return k;
}

// A case on the device: its inputs uploaded, the gradient outputs NaN-poisoned (a gradient a kernel
// leaves unwritten cannot pass), and the launches' tensor sets pointing at them; the gate, x.checkpoints
// and g.dg are left to the caller.
struct DeviceCase {
  vla::gpu::DeviceBuffer q, k, v, u, dout, gate, dq, dk, dv, du, dg, o;
  vla::gpu::RecurrentTensors x;
  vla::gpu::RecurrentGrads g;
  explicit DeviceCase(const Case& c)
      : q(c.in[0]), k(c.in[1]), v(c.in[2]), u(c.in[3]), dout(c.in[4]), gate(c.gate), dq(c.in[0].size()), dk(c.in[0].size()),
        dv(c.in[0].size()), du(c.in[0].size()), dg(c.gate.size()), o(c.in[0].size()) {
    for (auto* b : {&dq, &dk, &dv, &du, &dg}) b->poison();
    x.q = q.get(); x.k = k.get(); x.v = v.get(); x.u = u.get(); x.o = o.get();
    x.B = c.s.B; x.H = c.s.H; x.T = c.s.T; x.d = c.s.d;
    g.dout = dout.get(); g.dq = dq.get(); g.dk = dk.get(); g.dv = dv.get(); g.du = du.get();
  }
  // Waits for the launches, checks the error they left (named by `what`), downloads dq, dk, dv, du.
  std::vector<std::vector<float>> grads(const std::string& what) {
    vla::gpu::check(cudaDeviceSynchronize(), (what + " (sync)").c_str());
    vla::gpu::check(cudaGetLastError(), (what + " (last error)").c_str());
    return {dq.download(), dk.download(), dv.download(), du.download()};
  }
};

// The gradients as a list: dq, dk, dv, then du (VLA's kernel) or dg (a gated DeltaNet; (B, H, T));
// linear attention and an ungated DeltaNet have three.
// fwd_ck: the forward kernel runs first and writes the checkpoints into the (NaN-poisoned) workspace,
// and the backward is told so (x.checkpoints): the training path, pass 1 skipped.
std::vector<std::vector<float>> run_gpu(const std::string& mixer, const Case& c, bool fwd_ck = false) {
  const vla::GpuKernel kern = kernel_of(mixer);
  const RecurrentKind kind = kern.kind;
  const Shape s = c.s;
  DeviceCase d(c);
  vla::gpu::DeviceBuffer ws(vla::gpu::recurrent_backward_workspace_floats(s.B, s.H, s.T, s.d));
  ws.poison();
  d.x.g = kern.gated ? d.gate.get() : nullptr;
  d.g.dg = d.dg.get();
  if (fwd_ck) {
    d.x.checkpoints = ws.get();
    vla::gpu::check(vla::gpu::recurrent_forward(kind, d.x, kern.params), "recurrent_forward launch");
  }
  vla::gpu::check(vla::gpu::recurrent_backward(kind, d.x, d.g, kern.params, ws.get()), "recurrent_backward launch");
  std::vector<std::vector<float>> r = d.grads("recurrent_backward");
  if (kind != RecurrentKind::Vla) r.pop_back();  // no du
  if (kern.gated) r.push_back(d.dg.download());
  return r;
}

// Sequence seq's (T, d) slice of a (B, H, T, d) buffer, in scalar S.
template <class S> vla::Mat<S> sequence_rows(const std::vector<float>& x, const Shape& s, std::size_t seq) {
  const std::size_t n = std::size_t(s.T) * s.d;
  vla::Mat<S> m(s.T, s.d);
  for (int t = 0; t < s.T; ++t)
    for (int i = 0; i < s.d; ++i) m(t, i) = S(x[seq * n + std::size_t(t) * s.d + i]);
  return m;
}

// The core head backward (core/model/head.hpp, the rules' adjoints) on every (b, h) sequence, in double
// on the same fp32-valued inputs; same list as run_gpu. VLA with A fixed (on DeltaNet's kernel, which has
// no u): its du must be exactly zero (A, the only reader of u, never changes), and is checked so here.
// refresh_period >= 0: VLA's refresh period set to it (0: off) instead of the preset's.
std::vector<std::vector<double>> run_reference(const std::string& mixer, const Case& c, int refresh_period = -1) {
  const vla::GpuKernel kern = kernel_of(mixer);
  const bool has_du = kern.kind == RecurrentKind::Vla;
  const Shape s = c.s;
  const std::size_t n = std::size_t(s.T) * s.d;
  std::vector<std::vector<double>> r(has_du || kern.gated ? 4 : 3, std::vector<double>(c.in[0].size()));
  if (kern.gated) r[3].resize(c.gate.size());
  vla::MixerConfig cfg;
  cfg.mixer = mixer;
  if (refresh_period >= 0) cfg.penalty.refresh_period = refresh_period;
  vla::with_rule<vla::Precision<double>>(cfg, [&](const auto& rule) {
    using Rule = std::decay_t<decltype(rule)>;
    for (std::size_t seq = 0; seq < std::size_t(s.B) * s.H; ++seq) {
      auto rows = [&](const std::vector<float>& x) { return sequence_rows<double>(x, s, seq); };
      vla::HeadSequence<double> x;
      x.q = rows(c.in[0]); x.k = rows(c.in[1]); x.v = rows(c.in[2]);
      if constexpr (Rule::needs.penalty) x.u = rows(c.in[3]);
      if constexpr (Rule::needs.gate) {
        x.g.resize(s.T, 1);
        for (int t = 0; t < s.T; ++t) x.g(t, 0) = double(c.gate[seq * s.T + t]);
      }
      const auto g = vla::model::head_forward_backward(rule, x, rows(c.in[4])).grad;
      const vla::Mat<double>* out[] = {&g.dq, &g.dk, &g.dv, &g.du};
      for (int a = 0; a < 3 + int(has_du); ++a)
        for (int t = 0; t < s.T; ++t)
          for (int i = 0; i < s.d; ++i) r[a][seq * n + std::size_t(t) * s.d + i] = (*out[a])(t, i);
      if (kern.gated)
        for (int t = 0; t < s.T; ++t) r[3][seq * s.T + t] = g.dg(t);
      if (kern.constant_A > 0) CHECK(g.du.cwiseAbs().maxCoeff() == 0.0);
    }
    return 0;
  });
  return r;
}

// VLA's head forward and backward in mp50, the toolkit's ground truth, on every (b, h) sequence of the same
// fp32-valued inputs: the output, then dq, dk, dv, du, rounded to double at the end. The rule as with_rule
// builds it for the "vla" mixer (VlaRule::from_config), with the refresh period set.
std::vector<std::vector<double>> run_reference_mp50(const Case& c, int refresh_period) {
  using vla::mp50;
  vla::MixerConfig cfg;
  cfg.mixer = "vla";
  cfg.penalty.refresh_period = refresh_period;
  const auto rule = vla::VlaRule<vla::Precision<mp50>>::from_config(cfg);
  const Shape s = c.s;
  const std::size_t n = std::size_t(s.T) * s.d;
  std::vector<std::vector<double>> r(5, std::vector<double>(c.in[0].size()));
  for (std::size_t seq = 0; seq < std::size_t(s.B) * s.H; ++seq) {
    auto rows = [&](const std::vector<float>& x) { return sequence_rows<mp50>(x, s, seq); };
    vla::HeadSequence<mp50> x;
    x.q = rows(c.in[0]); x.k = rows(c.in[1]); x.v = rows(c.in[2]); x.u = rows(c.in[3]);
    const auto res = vla::model::head_forward_backward(rule, x, rows(c.in[4]));
    const vla::Mat<mp50>* out[] = {&res.O, &res.grad.dq, &res.grad.dk, &res.grad.dv, &res.grad.du};
    for (int a = 0; a < 5; ++a)
      for (int t = 0; t < s.T; ++t)
        for (int i = 0; i < s.d; ++i) r[a][seq * n + std::size_t(t) * s.d + i] = vla::to_double((*out[a])(t, i));
  }
  return r;
}

// The group-parallel VLA backward (vla_group_backward) with groups of group_tokens (0: its own choice,
// vla_group_backward_tokens) after the forward that leaves its checkpoints: the fused forward (all of
// them) when chunked_group < 0; else the chunked forward (only at its group starts; chunk length `chunk`,
// groups of chunked_group segments, 0 the launch's choice). Workspace and outputs poisoned. dq, dk, dv, du.
struct GroupRun { std::vector<std::vector<float>> grads; int group_tokens, starts_every; };
GroupRun run_gpu_group(const Case& c, const vla::gpu::RecurrentParams& p, int group_tokens, int chunked_group = -1, int chunk = 0) {
  const Shape s = c.s;
  if (group_tokens == 0) group_tokens = vla::gpu::vla_group_backward_tokens(s.B, s.H, s.T, s.d);
  const int starts_every = chunked_group < 0 ? 0 : vla::gpu::chunked_vla_group_tokens(chunk, chunked_group, p, s.B * s.H, s.T, true);
  DeviceCase d(c);
  vla::gpu::DeviceBuffer ws(vla::gpu::vla_group_backward_workspace_floats(s.B, s.H, s.T, s.d, group_tokens));
  ws.poison();
  d.x.checkpoints = ws.get();
  if (chunked_group < 0) vla::gpu::check(vla::gpu::recurrent_forward(RecurrentKind::Vla, d.x, p), "recurrent_forward launch");
  else vla::gpu::check(vla::gpu::chunked_vla_forward(d.x, p, chunk, chunked_group), "chunked_vla_forward launch");
  vla::gpu::check(vla::gpu::vla_group_backward(d.x, d.g, p, group_tokens, starts_every, ws.get()), "vla_group_backward launch");
  return {d.grads("vla_group_backward"), group_tokens, starts_every};
}

// The chunk-form backward (chunked_vla_backward) after the chunked forward that leaves every chunk's start
// state (chunk length `chunk`, 0 its default), with groups of group_tokens (0: its own choice). Outputs and
// workspace poisoned. dq, dk, dv, du; starts_every reports the chunk length.
GroupRun run_gpu_chunkwise(const Case& c, const vla::gpu::RecurrentParams& p, int group_tokens, int chunk = 0) {
  const Shape s = c.s;
  if (group_tokens == 0) group_tokens = vla::gpu::chunked_vla_backward_group_tokens(chunk, p, s.B, s.H, s.T);
  DeviceCase d(c);
  vla::gpu::DeviceBuffer starts(vla::gpu::chunked_vla_chunk_starts_floats(s.B, s.H, s.T, chunk, p)),
      ws(vla::gpu::chunked_vla_backward_workspace_floats(chunk, p, s.B, s.H, s.T, group_tokens));
  for (auto* b : {&starts, &ws}) b->poison();
  vla::gpu::check(vla::gpu::chunked_vla_forward(d.x, p, chunk, 0, nullptr, starts.get()), "chunked_vla_forward launch");
  vla::gpu::check(vla::gpu::chunked_vla_backward(d.x, d.g, p, chunk, group_tokens, starts.get(), ws.get()), "chunked_vla_backward launch");
  return {d.grads("chunked_vla_backward"), group_tokens, vla::gpu::chunked_vla_chunk(chunk, p)};
}

// Checks a group-parallel run against the double reference at the fp32 bound, every element written and
// finite; reports its error next to the sequential kernel's (`seq`, from the same checkpoints; empty:
// not run).
void check_group(const std::string& label, const Shape& s, const GroupRun& run, const std::vector<std::vector<double>>& ref,
                 const std::vector<std::vector<float>>& seq) {
  const char* names[] = {"dq_raw", "dk_raw", "dv", "du_raw"};
  const double tol = fp32_bound(s);
  REQUIRE(ref.size() == 4);
  REQUIRE(run.grads.size() == 4);
  for (std::size_t a = 0; a < 4; ++a) {
    INFO(label << " " << names[a] << " B=" << s.B << " H=" << s.H << " T=" << s.T << " d=" << s.d << " group " << run.group_tokens
               << " tokens, checkpoints every " << run.starts_every << ", tol " << tol);
    bool finite = true;
    for (float x : run.grads[a]) finite = finite && std::isfinite(x);
    REQUIRE(finite);
    // A failure means a wrong chain (R_g, Phi_g or the carries), a wrong group boundary or checkpoint, or
    // a race between groups: the group form is the sequential reverse pass in exact arithmetic.
    const double e = rel_err(run.grads[a], ref[a]);
    const double e_seq = seq.empty() ? std::nan("") : rel_err(seq[a], ref[a]);
    WARN(label << " group backward " << names[a] << " d=" << s.d << " T=" << s.T << " group " << run.group_tokens << " starts "
               << run.starts_every << ": rel err " << e
               << " (sequential kernel " << e_seq << ", bound " << tol << ")");
    CHECK(e <= tol);
  }
}

// Bound on the difference between the backward from the forward kernel's checkpoints and the
// self-checkpointing one (relative, norm-wise): 16 u. Both are the same reverse pass from states that
// differ only in rounding (the forward kernel sums in another order; its A is symmetrised at the load),
// each within a few u of the double reference at these shapes; a wrong checkpoint slot, step or layout,
// or an A read unsymmetrised, would differ at O(1) (or NaN: the workspace is poisoned).
constexpr double kPathBound = 16.0 / (1 << 24);

// fwd_ck: the gradients from the forward kernel's checkpoints (run_gpu), checked against the reference
// at the same bound and against the self-checkpointing backward at kPathBound.
// key_shift: added to every raw key (vla-no-knorm: see the forward test's check_mixer).
void check_shapes(const std::string& mixer, const std::vector<Shape>& shapes, std::uint64_t seed, bool fwd_ck = false,
                  float key_shift = 0.f) {
  const char* names[] = {"dq_raw", "dk_raw", "dv", kernel_of(mixer).kind == RecurrentKind::Vla ? "du_raw" : "dg"};
  const std::string label = mixer + (fwd_ck ? "+fwd-ck" : "");
  for (const Shape& s : shapes) {
    Case c = random_case(s, seed++);  // fresh inputs per shape
    for (float& k : c.in[1]) k += key_shift;
    const auto gpu = run_gpu(mixer, c, fwd_ck);
    const auto ref = run_reference(mixer, c);
    const auto self = fwd_ck ? run_gpu(mixer, c) : std::vector<std::vector<float>>{};
    const double tol = fp32_bound(s);
    for (std::size_t a = 0; a < gpu.size(); ++a) {
      INFO(label << " " << names[a] << " B=" << s.B << " H=" << s.H << " T=" << s.T << " d=" << s.d << " tol=" << tol);
      bool finite = true;  // every element written (the poison is NaN) and finite
      for (float x : gpu[a]) finite = finite && std::isfinite(x);
      REQUIRE(finite);
      // The reference is a gradient of the same shape, finite and not zero (a reference that returned
      // zeros or NaN would make the relative error below meaningless).
      REQUIRE(ref.size() == gpu.size());
      REQUIRE(ref[a].size() == gpu[a].size());
      double ref_sq = 0;
      for (double x : ref[a]) ref_sq += x * x;
      REQUIRE(std::isfinite(ref_sq));
      REQUIRE(ref_sq > 0);
      // A failure means the kernel differentiates a different function than the reference (a wrong
      // adjoint term, a wrong chunk / checkpoint index, a race on a shared matrix), not rounding.
      const double e = rel_err(gpu[a], ref[a]);
      WARN(label << " backward " << names[a] << " d=" << s.d << " T=" << s.T << ": rel err " << e << " (bound " << tol << ")");
      CHECK(e <= tol);
      if (fwd_ck) {
        const double p = rel_err(gpu[a], std::vector<double>(self[a].begin(), self[a].end()));
        WARN(label << " " << names[a] << " d=" << s.d << " T=" << s.T << ": vs self-checkpointing " << p / std::ldexp(1.0, -24)
                   << " u (bound 16 u)");
        CHECK(p <= kPathBound);
      }
    }
  }
}

// d = 128 has its own layout (A's column in registers, no slot prefetch for VLA; gpu/recurrent_backward.cu),
// so it gets a ragged and an exact-multiple T of its own.
const std::vector<Shape> kFullShapes{{2, 3, 13, 16}, {3, 2, 64, 16}, {2, 2, 100, 32}, {1, 3, 77, 32}, {2, 1, 70, 64},
                                     {1, 2, 96, 64},  {2, 1, 70, 96},  {2, 1, 70, 128}, {1, 2, 96, 128}};
const std::vector<Shape> kSmallShapes{{1, 2, 40, 16}, {2, 1, 37, 32}, {1, 1, 35, 64}, {1, 1, 35, 96}, {1, 1, 35, 128}};

}  // namespace

TEST_CASE("fused VLA backward matches the double reference backward within the fp32 bound", "[gpu][bwd-full][bwd]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU kernel test is skipped"); return; }
  // T around the checkpoint chunk (32): shorter than one chunk, an exact multiple, a ragged tail;
  // all but the first cross the refresh step t + 1 = 20. d in {16, 32, 64, 96, 128}.
  check_shapes("vla", kFullShapes, 500);
}

TEST_CASE("fused VLA backward, small shapes (the sanitizers' racecheck run)", "[gpu][bwd]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU kernel test is skipped"); return; }
  // Same check as above on shapes small enough for racecheck (which instruments every shared access):
  // still two chunks and a refresh step at each d.
  check_shapes("vla", kSmallShapes, 700);
}

TEST_CASE("fused VLA backward without key normalisation, and VLA with A fixed on DeltaNet's kernel, match the double reference",
          "[gpu][bwd-full][bwd]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU kernel test is skipped"); return; }
  // Table 4's ablations as training runs them: vla-no-knorm on VLA's kernel (k_hat = phi(k), its adjoint
  // without unit()'s projection), keys shifted so the recurrence contracts (check_mixer in the forward
  // test says why); vla-fixed-a on ungated DeltaNet's (core/rules/vla/gpu.hpp), against the CPU rule's own
  // adjoint with the tracker never updated (and du = 0 there).
  check_shapes("vla-no-knorm", kFullShapes, 7500, false, -3.f);
  check_shapes("vla-fixed-a", kFullShapes, 8500);
}

TEST_CASE("Table 4's ablations from the forward kernel's checkpoints, small shapes (racecheck run)", "[gpu][bwd]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU kernel test is skipped"); return; }
  check_shapes("vla-no-knorm", kSmallShapes, 7700, true, -3.f);
  check_shapes("vla-fixed-a", kSmallShapes, 8700, true);
}

TEST_CASE("fused linear attention and DeltaNet backward match the double reference within the fp32 bound", "[gpu][bwd-full][bwd]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU kernel test is skipped"); return; }
  check_shapes("linear", kFullShapes, 1500);
  check_shapes("deltanet", kFullShapes, 2500);  // gated: dg checked too
}

TEST_CASE("fused linear attention and DeltaNet backward, small shapes (racecheck run)", "[gpu][bwd]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU kernel test is skipped"); return; }
  check_shapes("linear", kSmallShapes, 1700);
  check_shapes("deltanet", kSmallShapes, 2700);
}

TEST_CASE("fused backward from the forward kernel's checkpoints matches the reference and the self-checkpointing backward",
          "[gpu][bwd-full][bwd]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU kernel test is skipped"); return; }
  // The training path (x.checkpoints): the forward kernel writes every 32nd state in its own layout and
  // rounding, the backward skips its first pass. Same shapes (chunk boundaries, refresh, d = 16 .. 128).
  check_shapes("vla", kFullShapes, 3500, true);
  check_shapes("linear", kFullShapes, 4500, true);
  check_shapes("deltanet", kFullShapes, 5500, true);
}

TEST_CASE("fused backward from the forward kernel's checkpoints, small shapes (racecheck run)", "[gpu][bwd]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU kernel test is skipped"); return; }
  check_shapes("vla", kSmallShapes, 3700, true);
  check_shapes("deltanet", kSmallShapes, 5700, true);
}

// Every sequence of a (B, H) launch of the case `seed` at shape s must equal, bit for bit, the same sequence
// launched alone; run(case) gives the gradients, each (B, H, T, d) or (B, H, T) (dg).
template <class Run> void check_sequences_alone(const std::string& label, const Shape& s, std::uint64_t seed, Run&& run) {
  const Case all = random_case(s, seed);
  const auto g_all = run(all);
  const std::size_t n = std::size_t(s.T) * s.d;
  for (std::size_t seq = 0; seq < std::size_t(s.B) * s.H; ++seq) {
    Case one{{1, 1, s.T, s.d}, {}, {}};
    for (int a = 0; a < 5; ++a) one.in[a].assign(all.in[a].begin() + seq * n, all.in[a].begin() + (seq + 1) * n);
    one.gate.assign(all.gate.begin() + seq * s.T, all.gate.begin() + (seq + 1) * s.T);
    const auto g_one = run(one);
    for (std::size_t a = 0; a < g_one.size(); ++a) {
      const std::size_t len = g_one[a].size();
      INFO(label << " d=" << s.d << " seq=" << seq << " gradient " << a);
      CHECK(std::equal(g_one[a].begin(), g_one[a].end(), g_all[a].begin() + seq * len));
    }
  }
}

TEST_CASE("fused backward is the same function of each sequence whatever the launch shape", "[gpu][bwd]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU kernel test is skipped"); return; }
  // One block per (b, h) with its own workspace slice and a fixed operation order: sequence (b, h)
  // of a (B, H) launch must equal, bit for bit, the same sequence launched alone. A difference means
  // blocks share scratch (a wrong workspace offset) or the result depends on scheduling (a race).
  for (const std::string kind : {"vla", "linear", "deltanet"})
    for (int d : {16, 32, 64, 96, 128})
      check_sequences_alone(kind, {2, 2, 45, d}, 900 + d, [&](const Case& c) { return run_gpu(kind, c); });
}

TEST_CASE("fused backward rejects what it does not implement instead of launching", "[gpu][bwd]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU kernel test is skipped"); return; }
  vla::gpu::DeviceBuffer buf(4 * 128);
  vla::gpu::RecurrentTensors x;
  x.q = x.k = x.v = x.u = buf.get();
  x.B = 1; x.H = 1; x.T = 4; x.d = 48;  // not a compiled head size (16, 32, 64, 96, 128): must not launch a wrong-d kernel
  vla::gpu::RecurrentGrads g;
  g.dout = buf.get(); g.dq = g.dk = g.dv = g.du = buf.get();
  CHECK(vla::gpu::recurrent_backward(vla::gpu::RecurrentKind::Vla, x, g, {}, buf.get()) == cudaErrorInvalidValue);
  CHECK(vla::gpu::recurrent_backward(RecurrentKind::Linear, x, g, {}, buf.get()) == cudaErrorInvalidValue);
  x.d = 256;
  CHECK(vla::gpu::recurrent_backward(RecurrentKind::DeltaNet, x, g, {}, buf.get()) == cudaErrorInvalidValue);
  x.d = 32;
  g.du = nullptr;  // VLA needs somewhere to put dL/du_raw
  CHECK(vla::gpu::recurrent_backward(RecurrentKind::Vla, x, g, {}, buf.get()) == cudaErrorInvalidValue);
  g.du = buf.get();
  x.checkpoints = buf.get() + 4;  // checkpoints said to be somewhere other than the workspace it reads
  CHECK(vla::gpu::recurrent_backward(RecurrentKind::Vla, x, g, {}, buf.get()) == cudaErrorInvalidValue);
}

TEST_CASE("group-parallel VLA backward from the fused forward's checkpoints matches the double reference",
          "[gpu][bwd-full][bwd][group-bwd]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU kernel test is skipped"); return; }
  // Groups of 1 .. 5 checkpoint chunks, one group (T < 32, T = group), a ragged last group, the refresh
  // inside groups and on their boundaries, d in {16, 32, 64}; and without key normalisation.
  struct Run { Shape s; std::vector<int> groups; };
  const std::vector<Run> runs{{{2, 2, 150, 32}, {32, 64, 160}}, {{1, 3, 77, 16}, {32, 64}}, {{2, 1, 100, 64}, {32, 96}},
                              {{1, 1, 20, 32}, {32}},           {{1, 2, 288, 32}, {96, 288}}};
  std::uint64_t seed = 9100;
  for (const Run& r : runs) {
    const Case c = random_case(r.s, seed++);
    const auto ref = run_reference("vla", c);
    const auto seq = run_gpu("vla", c, true);
    for (int gt : r.groups) check_group("vla", r.s, run_gpu_group(c, kernel_of("vla").params, gt), ref, seq);
  }
  Case c = random_case({2, 1, 130, 32}, seed++);
  for (float& k : c.in[1]) k -= 3.f;  // vla-no-knorm: keys shifted so the recurrence contracts (check_mixer)
  const auto ref = run_reference("vla-no-knorm", c);
  const auto seq = run_gpu("vla-no-knorm", c, true);
  for (int gt : {32, 64}) check_group("vla-no-knorm", c.s, run_gpu_group(c, kernel_of("vla-no-knorm").params, gt), ref, seq);
}

TEST_CASE("group-parallel VLA backward after the chunked forward's group-start checkpoints matches the double reference",
          "[gpu][bwd-full][bwd][group-bwd][chunked]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU kernel test is skipped"); return; }
  // The fwd+bwd pair without a sequential pass: the chunked forward writes only (S, A, z) before each of its
  // groups (its own fp32 rounding, A not symmetric), the fill launch the rest; the backward's groups are its
  // own (32 or 64 tokens, or its choice), shorter or longer than the forward's. Refresh 20 (segments of 20
  // tokens: forward groups of 8 or 16 segments, or the launch's choice rounded to 8) and off (chunks of 16:
  // groups of 2 or 6).
  struct Run { Shape s; int period, chunk; std::vector<int> groups; };
  const std::vector<Run> runs{{{2, 3, 67, 32}, 20, 0, {8, 0}}, {{1, 2, 1009, 32}, 20, 0, {8, 16, 0}}, {{3, 2, 150, 32}, 0, 16, {2, 6, 0}}};
  std::uint64_t seed = 9300;
  for (const Run& r : runs) {
    const Case c = random_case(r.s, seed++);
    const auto ref = run_reference("vla", c, r.period);
    vla::gpu::RecurrentParams p = kernel_of("vla").params;
    p.refresh_period = r.period;
    for (int g : r.groups)
      for (int gt : {32, 64, 0})
        check_group("vla after chunked (refresh " + std::to_string(r.period) + ")", r.s, run_gpu_group(c, p, gt, g, r.chunk), ref, {});
  }
}

TEST_CASE("group-parallel VLA backward is the same function of each sequence whatever the launch shape", "[gpu][bwd][group-bwd]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU kernel test is skipped"); return; }
  // Blocks per (sequence, group) with their own slots, chains per sequence: a sequence of a (B, H) launch
  // must equal, bit for bit, the same sequence alone. A difference is a wrong slot offset or a race.
  const auto p = kernel_of("vla").params;
  check_sequences_alone("vla group", {2, 2, 100, 32}, 9500, [&](const Case& c) { return run_gpu_group(c, p, 32).grads; });
}

TEST_CASE("group-parallel VLA backward and the chunked forward's checkpoints refuse what they do not implement", "[gpu][bwd][group-bwd]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU kernel test is skipped"); return; }
  using vla::gpu::vla_group_backward;
  vla::gpu::DeviceBuffer buf(64 * 1024);
  vla::gpu::RecurrentTensors x;
  x.q = x.k = x.v = x.u = x.o = buf.get();
  x.checkpoints = buf.get();
  x.B = 1; x.H = 1; x.T = 40; x.d = 32;
  vla::gpu::RecurrentGrads g;
  g.dout = g.dq = g.dk = g.dv = g.du = buf.get();
  const vla::gpu::RecurrentParams p;
  for (int gt : {0, 16, 48, -32}) {  // a group must be a whole number of checkpoint chunks (32 tokens)
    INFO("group_tokens " << gt);
    CHECK(vla_group_backward(x, g, p, gt, 0, buf.get()) == cudaErrorInvalidValue);
  }
  for (int every : {20, -32}) {  // so must the span between given checkpoints
    INFO("starts_every " << every);
    CHECK(vla_group_backward(x, g, p, 32, every, buf.get()) == cudaErrorInvalidValue);
  }
  x.d = 96;  // compiled for d in {16, 32, 64}
  CHECK(vla_group_backward(x, g, p, 32, 0, buf.get()) == cudaErrorInvalidValue);
  x.d = 32;
  vla::gpu::RecurrentParams big_eps;
  big_eps.eps = 2.f;  // delta_t could be clamped: the dA chain would not be a congruence
  CHECK(vla_group_backward(x, g, big_eps, 32, 0, buf.get()) == cudaErrorInvalidValue);
  x.checkpoints = nullptr;  // no forward has left checkpoints
  CHECK(vla_group_backward(x, g, p, 32, 0, buf.get()) == cudaErrorInvalidValue);
  x.checkpoints = buf.get();
  g.du = nullptr;
  CHECK(vla_group_backward(x, g, p, 32, 0, buf.get()) == cudaErrorInvalidValue);
  // Its own group: whole chunks, at least one, at most the sequence's.
  for (int T : {1, 40, 5000}) {
    const int gt = vla::gpu::vla_group_backward_tokens(1, 1, T, 32);
    INFO("T " << T << ": group " << gt);
    CHECK(gt % 32 == 0);
    CHECK(gt >= 32);
    CHECK(gt <= (T + 31) / 32 * 32);
  }
  // The chunked forward with checkpoints: 3 segments of 20 tokens are not a whole number of 32-token chunks.
  CHECK(vla::gpu::chunked_vla_forward(x, p, 0, 3) == cudaErrorInvalidValue);
  // Its own choice is rounded to a whole number: 8 segments of 20 at least.
  CHECK(vla::gpu::chunked_vla_group_tokens(0, 0, p, 1, 40, true) == 160);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);  // nothing was launched that could fail
}

TEST_CASE("chunk-form VLA backward after the chunked forward's chunk starts matches the double reference",
          "[gpu][bwd-full][bwd][chunk-bwd][chunked]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU kernel test is skipped"); return; }
  // Every chunk rebuilt from the state the forward left before it, its adjoint in matrix form; groups of one
  // chunk up to the whole sequence, a ragged last chunk and group, chunks of 20 (the refresh period), 7 (three
  // per segment, the last of 6), 16 and 32 without the refresh, 1 (each token a chunk).
  struct Run { Shape s; int period, chunk; std::vector<int> groups; };
  const std::vector<Run> runs{{{2, 3, 67, 32}, 20, 0, {20, 40, 0}},   {{1, 2, 1009, 32}, 20, 0, {20, 160, 0, 1020}},
                              {{2, 1, 150, 32}, 20, 7, {20, 60, 0}},   {{3, 2, 150, 32}, 0, 16, {16, 48, 0}},
                              {{1, 2, 301, 32}, 0, 32, {32, 320, 0}}, {{1, 1, 45, 32}, 0, 1, {1, 9, 0}}};
  std::uint64_t seed = 9700;
  for (const Run& r : runs) {
    const Case c = random_case(r.s, seed++);
    const auto ref = run_reference("vla", c, r.period);
    vla::gpu::RecurrentParams p = kernel_of("vla").params;
    p.refresh_period = r.period;
    for (int gt : r.groups)
      check_group("vla chunk form (refresh " + std::to_string(r.period) + ")", r.s, run_gpu_chunkwise(c, p, gt, r.chunk), ref, {});
  }
}

TEST_CASE("chunked VLA forward and chunk-form backward against the mp50 reference", "[gpu][bwd][chunk-bwd][chunked]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU kernel test is skipped"); return; }
  // The rest of the GPU suite holds the kernels to the core path in double; here to the ground truth itself,
  // at shapes small enough for mp50, with the double path's own distance from it: if that were not far below
  // the fp32 bound, the double reference could not stand in for mp50 elsewhere.
  struct Run { Shape s; int period, chunk; };
  std::uint64_t seed = 9800;
  for (const Run& r : {Run{{1, 2, 67, 32}, 20, 0}, Run{{1, 1, 45, 32}, 0, 16}}) {
    const Case c = random_case(r.s, seed++);
    const auto mp = run_reference_mp50(c, r.period);
    const auto dbl = run_reference("vla", c, r.period);
    vla::gpu::RecurrentParams p = kernel_of("vla").params;
    p.refresh_period = r.period;
    DeviceCase d(c);
    vla::gpu::DeviceBuffer starts(vla::gpu::chunked_vla_chunk_starts_floats(r.s.B, r.s.H, r.s.T, r.chunk, p)),
        ws(vla::gpu::chunked_vla_backward_workspace_floats(r.chunk, p, r.s.B, r.s.H, r.s.T));
    for (auto* b : {&starts, &ws, &d.o}) b->poison();
    vla::gpu::check(vla::gpu::chunked_vla_forward(d.x, p, r.chunk, 0, nullptr, starts.get()), "chunked_vla_forward launch");
    vla::gpu::check(vla::gpu::chunked_vla_backward(d.x, d.g, p, r.chunk, 0, starts.get(), ws.get()), "chunked_vla_backward launch");
    std::vector<std::vector<float>> got = d.grads("chunked VLA forward and backward");
    got.insert(got.begin(), d.o.download());
    const char* names[] = {"output", "dq_raw", "dk_raw", "dv", "du_raw"};
    const double tol = fp32_bound(r.s);
    for (int a = 0; a < 5; ++a) {
      // The double reference (gradients only) against mp50.
      const double e_dbl = a > 0 ? rel_err(dbl[a - 1], mp[a]) : std::nan(""), e = rel_err(got[a], mp[a]);
      INFO(names[a] << " T=" << r.s.T << " refresh " << r.period << " chunk " << r.chunk << ", tol " << tol);
      WARN("chunked VLA against mp50, " << names[a] << " T=" << r.s.T << ": GPU rel err " << e << ", the double reference "
                                       << e_dbl);
      // A failure: the kernels are wrong where the double reference could not see it, or (e_dbl) the double
      // reference is not the ground truth the rest of the suite takes it for.
      CHECK(e <= tol);
      if (a > 0) CHECK(e_dbl <= 1e-12);
    }
  }
}

TEST_CASE("chunk-form VLA backward is the same function of each sequence whatever the launch shape", "[gpu][bwd][chunk-bwd]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU kernel test is skipped"); return; }
  // One block per (sequence, group), chains per sequence: a sequence of a (B, H) launch must equal, bit for
  // bit, the same sequence alone. A difference is a wrong slot or chunk-start offset, or a race.
  const auto p = kernel_of("vla").params;
  check_sequences_alone("vla chunk form", {2, 2, 130, 32}, 9800, [&](const Case& c) { return run_gpu_chunkwise(c, p, 40).grads; });
}

TEST_CASE("chunk-form VLA backward refuses what it does not implement", "[gpu][bwd][chunk-bwd]") {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU kernel test is skipped"); return; }
  using vla::gpu::chunked_vla_backward;
  vla::gpu::DeviceBuffer buf(64 * 1024);
  vla::gpu::RecurrentTensors x;
  x.q = x.k = x.v = x.u = x.o = buf.get();
  x.B = 1; x.H = 1; x.T = 40; x.d = 32;
  vla::gpu::RecurrentGrads g;
  g.dout = g.dq = g.dk = g.dv = g.du = buf.get();
  const vla::gpu::RecurrentParams p;  // refresh 20: groups of whole 20-token segments
  for (int gt : {10, 30, -20}) {
    INFO("group_tokens " << gt);
    CHECK(chunked_vla_backward(x, g, p, 0, gt, buf.get(), buf.get()) == cudaErrorInvalidValue);
  }
  for (int chunk : {-1, 33}) {
    INFO("chunk " << chunk);
    CHECK(chunked_vla_backward(x, g, p, chunk, 20, buf.get(), buf.get()) == cudaErrorInvalidValue);
  }
  CHECK(chunked_vla_backward(x, g, p, 0, 20, nullptr, buf.get()) == cudaErrorInvalidValue);  // no chunk starts
  CHECK(chunked_vla_backward(x, g, p, 0, 20, buf.get(), nullptr) == cudaErrorInvalidValue);  // no workspace
  vla::gpu::RecurrentParams big_eps;
  big_eps.eps = 2.f;  // delta_t could be clamped: the chunk form's pivots would not be Alg. 1's
  CHECK(chunked_vla_backward(x, g, big_eps, 0, 20, buf.get(), buf.get()) == cudaErrorInvalidValue);
  vla::gpu::RecurrentParams no_knorm;
  no_knorm.normalise_key = false;
  CHECK(chunked_vla_backward(x, g, no_knorm, 0, 20, buf.get(), buf.get()) == cudaErrorInvalidValue);
  x.d = 16;  // compiled for d = 32
  CHECK(chunked_vla_backward(x, g, p, 0, 20, buf.get(), buf.get()) == cudaErrorInvalidValue);
  x.d = 32;
  g.du = nullptr;
  CHECK(chunked_vla_backward(x, g, p, 0, 20, buf.get(), buf.get()) == cudaErrorInvalidValue);
  // Its own group: whole segments, at least one.
  for (int T : {1, 40, 5000}) {
    const int gt = vla::gpu::chunked_vla_backward_group_tokens(0, p, 1, 1, T);
    INFO("T " << T << ": group " << gt);
    CHECK(gt % 20 == 0);
    CHECK(gt >= 20);
  }
  CHECK(cudaDeviceSynchronize() == cudaSuccess);  // nothing was launched that could fail
}
