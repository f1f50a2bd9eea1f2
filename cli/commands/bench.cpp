// `vla bench step-check`: on the CPU, what the per-step non-finite check of every layer forward
// (core/rules/non_finite.hpp, called by MixerLayer after each step) costs against the rule's step alone:
// T steps of one head over pre-generated random inputs, with and without the check, interleaved, median
// of --reps; the ratio is an upper bound on the check's share of a layer forward (which adds the four
// projections per token).
//
// `vla bench attention --device cuda`: times the fused forward kernels (VLA, linear attention, DeltaNet)
// and each one's forward+backward (gpu/recurrent_backward.hpp), the chunkwise-parallel VLA forward
// (gpu/chunked_vla_forward.hpp, at the head widths it has; also with one-pass TF32 products, a lower
// precision timed beside it, never used unless asked for), and the toolkit's causal softmax attention
// (gpu/softmax_attention.hpp, cuBLAS + row kernels, query-chunked so that T = 65536 fits), forward and
// forward+backward, and prints the T where VLA becomes faster than that softmax;
// with CUDA events, median of --reps timed runs after 2 warm-ups, on device-generated random inputs
// (uniform, unit variance; never zeros). Prints a table and, with --csv, writes it (atomically) for
// gpu/bench_torch.py, which adds PyTorch's SDPA and the PyTorch loop of Algorithm 1 and prints ratios.
#include "cli/command.hpp"
#include "cli/list_option.hpp"
#include "core/io/csv.hpp"
#include "core/rules/gpu_kernel.hpp"
#include "core/rules/non_finite.hpp"
#include "core/rules/registry.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <cmath>
#include <exception>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef VLA_HAVE_CUDA
#include "gpu/chunked_vla_backward.hpp"
#include "gpu/chunked_vla_forward.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_query.hpp"
#include "gpu/recurrent_backward.hpp"
#include "gpu/recurrent_forward.hpp"
#include "gpu/softmax_attention.hpp"

#include <cublas_v2.h>
#endif

namespace {

struct BenchArgs {
  std::string device = "cuda";
  std::vector<int> T{1024, 4096, 16384, 65536};
  int batch = 8, heads = 4, d_head = 32, reps = 10;
  std::string csv;
};

#ifdef VLA_HAVE_CUDA
// Median milliseconds of `launch` (which enqueues work on the legacy default stream), timed with CUDA
// events over 2 warm-ups (module load, clocks; discarded) and `reps` timed runs. Every call checked.
template <class Launch> double median_event_ms(int reps, Launch&& launch) {
  using vla::gpu::check;
  cudaEvent_t e0, e1;
  check(cudaEventCreate(&e0), "cudaEventCreate");
  check(cudaEventCreate(&e1), "cudaEventCreate");
  std::vector<double> ms;
  for (int r = 0; r < 2 + reps; ++r) {
    check(cudaEventRecord(e0), "cudaEventRecord");
    launch();
    check(cudaEventRecord(e1), "cudaEventRecord");
    check(cudaEventSynchronize(e1), "cudaEventSynchronize");
    float t = 0;
    check(cudaEventElapsedTime(&t, e0, e1), "cudaEventElapsedTime");
    if (r >= 2) ms.push_back(t);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Median milliseconds of one fused forward over (B, H, T, d) inputs; with `backward`, of the forward
// followed by the fused backward (dL/do random, the workspace allocated once outside the timing); with
// `chunked`, of the chunkwise-parallel VLA forward instead (default chunk, Algorithm 1's parameters), and
// as its backward the group-parallel one (gpu/recurrent_backward.hpp) from the forward's group starts, or
// with `chunk_form` the chunk-form one (gpu/chunked_vla_backward.hpp) from the forward's chunk starts.
// `products`: how the chunked forward's tensor-core products read their operands (core/product_operands.hpp).
// Every workspace is allocated outside the timing.
double time_kernel(vla::gpu::RecurrentKind kind, const BenchArgs& a, int T, bool backward = false, bool chunked = false,
                   bool chunk_form = false, vla::ProductOperands products = vla::ProductOperands::Full) {
  using vla::gpu::check;
  const std::size_t n = std::size_t(a.batch) * a.heads * T * a.d_head;
  vla::gpu::DeviceBuffer q(n), k(n), v(n), u(n), o(n), g(std::size_t(a.batch) * a.heads * T);  // (B, H, T, d), g (B, H, T)
  unsigned long long seed = 1;
  for (auto* b : {&q, &k, &v, &u, &g}) check(vla::gpu::fill_random(b->get(), (long long)b->size(), seed++), "fill_random");
  vla::gpu::RecurrentTensors x;
  x.q = q.get(); x.k = k.get(); x.v = v.get(); x.u = u.get(); x.g = g.get(); x.o = o.get();
  x.B = a.batch; x.H = a.heads; x.T = T; x.d = a.d_head;
  vla::gpu::DeviceBuffer dout, dq, dk, dv, du, dg, ws;  // (B, H, T, d) each, dg (B, H, T); ws: the backward's checkpoints
  // The chunked forward's group (its launch's choice, rounded to whole checkpoint chunks: where it leaves
  // checkpoints) and the backward's own (one wave of walks on this device).
  const bool matrix_bwd = chunked && backward && chunk_form;
  const bool group_bwd = chunked && backward && !chunk_form;
  const int starts_every = group_bwd ? vla::gpu::chunked_vla_group_tokens(0, 0, {}, a.batch * a.heads, T, true) : 0;
  const int group_tokens = group_bwd ? vla::gpu::vla_group_backward_tokens(a.batch, a.heads, T, a.d_head) : 0;
  vla::gpu::RecurrentGrads grads;
  if (backward) {
    dout = vla::gpu::DeviceBuffer(n); dq = vla::gpu::DeviceBuffer(n); dk = vla::gpu::DeviceBuffer(n);
    dv = vla::gpu::DeviceBuffer(n); du = vla::gpu::DeviceBuffer(n); dg = vla::gpu::DeviceBuffer(g.size());
    ws = vla::gpu::DeviceBuffer(matrix_bwd  ? vla::gpu::chunked_vla_backward_workspace_floats(0, {}, a.batch, a.heads, T)
                                : group_bwd ? vla::gpu::vla_group_backward_workspace_floats(a.batch, a.heads, T, a.d_head, group_tokens)
                                            : vla::gpu::recurrent_backward_workspace_floats(a.batch, a.heads, T, a.d_head));
    check(vla::gpu::fill_random(dout.get(), (long long)n, seed++), "fill_random");
    grads.dout = dout.get(); grads.dq = dq.get(); grads.dk = dk.get(); grads.dv = dv.get(); grads.du = du.get(); grads.dg = dg.get();
    // The forward writes the backward's checkpoints (the backward skips its first pass); the chunk form's
    // forward leaves every chunk's start state instead.
    if (!matrix_bwd) x.checkpoints = ws.get();
  }
  vla::gpu::DeviceBuffer starts, fwd_ws;  // fwd_ws: the chunked forward's workspace, allocated once as training's is
  if (matrix_bwd) starts = vla::gpu::DeviceBuffer(vla::gpu::chunked_vla_chunk_starts_floats(a.batch, a.heads, T, 0, {}));
  if (chunked) fwd_ws = vla::gpu::DeviceBuffer(vla::gpu::chunked_vla_forward_workspace_floats(a.batch, a.heads, T, 0, 0, {}, x.checkpoints != nullptr));
  return median_event_ms(a.reps, [&] {
    if (matrix_bwd)
      check(vla::gpu::chunked_vla_forward(x, {}, 0, 0, nullptr, starts.get(), products, fwd_ws.get(), fwd_ws.size()), "chunked_vla_forward");
    else if (chunked)
      check(vla::gpu::chunked_vla_forward(x, {}, 0, 0, nullptr, nullptr, products, fwd_ws.get(), fwd_ws.size()), "chunked_vla_forward");
    else check(vla::gpu::recurrent_forward(kind, x, {}), "recurrent_forward");
    if (matrix_bwd) check(vla::gpu::chunked_vla_backward(x, grads, {}, 0, 0, starts.get(), ws.get()), "chunked_vla_backward");
    else if (group_bwd) check(vla::gpu::vla_group_backward(x, grads, {}, group_tokens, starts_every, ws.get()), "vla_group_backward");
    else if (backward) check(vla::gpu::recurrent_backward(kind, x, grads, {}, ws.get()), "recurrent_backward");
  });
}

// Median milliseconds of the toolkit's causal softmax attention forward (with `backward`: forward then
// backward), timed as time_kernel. The workspace (the default plan's query chunks) is allocated outside
// the timing. A shape the device cannot hold (e.g. out of memory) prints why and gives NaN, never a crash.
double time_softmax(const BenchArgs& a, int T, bool backward) {
  using vla::gpu::check;
  cublasHandle_t blas = nullptr;
  try {
    const std::size_t n = std::size_t(a.batch) * a.heads * T * a.d_head;
    const auto plan = vla::gpu::softmax_attention_plan(a.batch, a.heads, T);
    vla::gpu::DeviceBuffer q(n), k(n), v(n), o(n), ws(plan.workspace_floats), dout, dq, dk, dv;
    unsigned long long seed = 1;
    for (auto* b : {&q, &k, &v}) check(vla::gpu::fill_random(b->get(), (long long)n, seed++), "fill_random");
    if (backward) {
      dout = vla::gpu::DeviceBuffer(n); dq = vla::gpu::DeviceBuffer(n); dk = vla::gpu::DeviceBuffer(n); dv = vla::gpu::DeviceBuffer(n);
      check(vla::gpu::fill_random(dout.get(), (long long)n, seed++), "fill_random");
    }
    if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate failed");
    cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH);  // plain fp32, as the training model
    const vla::gpu::AttentionInputs x{q.get(), k.get(), v.get(), a.batch, a.heads, T, a.d_head};
    // The handle runs on the legacy default stream, as the events.
    const double ms = median_event_ms(a.reps, [&] {
      vla::gpu::softmax_attention_forward(blas, x, o.get(), plan, ws.get());
      if (backward) vla::gpu::softmax_attention_backward(blas, x, dout.get(), dq.get(), dk.get(), dv.get(), plan, ws.get());
    });
    cublasDestroy(blas);
    return ms;
  } catch (const std::exception& e) {
    if (blas) cublasDestroy(blas);
    cudaGetLastError();  // clear a non-sticky error (an allocation failure) so the next point can run
    fmt::print("softmax {} at T={}: skipped ({})\n", backward ? "fwd+bwd" : "forward", T, e.what());
    return std::numeric_limits<double>::quiet_NaN();
  }
}

// Smallest T where ours < theirs, log-log interpolated between the neighbouring measured points (as
// gpu/bench_torch.py's crossover); points where either is NaN (not measured) are left out.
std::string crossover(const std::vector<int>& Ts, const std::vector<double>& ours, const std::vector<double>& theirs) {
  std::vector<double> t, r;
  for (std::size_t i = 0; i < Ts.size(); ++i)
    if (std::isfinite(ours[i]) && std::isfinite(theirs[i])) { t.push_back(Ts[i]); r.push_back(std::log(ours[i] / theirs[i])); }
  if (t.empty()) return "not measured";
  for (std::size_t i = 0; i < t.size(); ++i)
    if (r[i] < 0) {
      if (i == 0) return fmt::format("<= {} (faster at every measured T)", t[0]);
      const double x = std::log(t[i - 1]) + (std::log(t[i]) - std::log(t[i - 1])) * r[i - 1] / (r[i - 1] - r[i]);
      return fmt::format("~{:.0f}", std::exp(x));
    }
  return fmt::format("> {} (not reached; ratio vla/softmax {:.3g} there)", t.back(), std::exp(r.back()));
}
#endif

void run(const BenchArgs& a) {
  if (a.device != "cuda") throw std::invalid_argument(fmt::format("--device: '{}' (allowed: cuda)", a.device));
  for (int t : a.T) if (t < 1) throw std::invalid_argument(fmt::format("--T: {} (allowed: integers >= 1)", t));
  if (a.batch < 1 || a.heads < 1) throw std::invalid_argument("--batch/--heads: must be >= 1");
  if (std::ranges::find(vla::kGpuRecurrentHeads, a.d_head) == std::end(vla::kGpuRecurrentHeads))
    throw std::invalid_argument(fmt::format("--d-head: {} (allowed: {})", a.d_head, fmt::join(vla::kGpuRecurrentHeads, ", ")));
  if (a.reps < 1) throw std::invalid_argument(fmt::format("--reps: {} (allowed: >= 1)", a.reps));
#ifdef VLA_HAVE_CUDA
  if (vla::gpu::device_count() == 0) throw std::runtime_error("no CUDA device visible");
  fmt::print("{}", vla::gpu::describe_devices());
  fmt::print("fused forward, fp32, B={} H={} d={}, median of {} CUDA-event timed runs after 2 warm-ups\n", a.batch, a.heads,
             a.d_head, a.reps);
  // The fused backward exists at every d the forward has (kGpuRecurrentHeads; gpu/recurrent_backward.hpp).
  const bool with_bwd = true;
  // The chunked VLA forward exists at the widths of kChunkedVlaHeads; elsewhere its column is NaN.
  const bool with_chunked = std::ranges::find(vla::gpu::kChunkedVlaHeads, a.d_head) != std::end(vla::gpu::kChunkedVlaHeads);
  fmt::print("{:>7} {:>12} {:>12} {:>12} {:>12} {:>14} {:>12} {:>16} {:>10} {:>14} {:>12} {:>12} {:>12} {:>14} {:>16} {:>12}\n", "T", "vla ms",
             "vla chunked", "linear ms", "deltanet ms", "vla us/step", "vla/deltanet", "vla fwd+bwd ms", "fb/fwd", "chunked fwd+bwd",
             "lin fwd+bwd", "dn fwd+bwd", "softmax ms", "sm fwd+bwd ms", "chunk-form f+b", "chunked tf32");
  // vla_chunked_fwdbwd_ms: the chunked forward with the group-parallel token-walk backward;
  // vla_chunkform_fwdbwd_ms: with the chunk-form backward; vla_chunked_tf32_ms: the chunked forward with
  // one-pass TF32 products (a precision of its own, never chosen for the user: docs/chunkwise-vla-gpu.md).
  vla::io::CsvTable table({"B", "H", "d", "T", "vla_ms", "vla_chunked_ms", "linear_ms", "deltanet_ms", "vla_fwdbwd_ms",
                           "vla_chunked_fwdbwd_ms", "linear_fwdbwd_ms", "deltanet_fwdbwd_ms", "softmax_ms", "softmax_fwdbwd_ms",
                           "vla_chunkform_fwdbwd_ms", "vla_chunked_tf32_ms"});
  std::vector<double> vla_f, vla_c, vla_fb, vla_cfb, sm_f, sm_fb;
  for (int T : a.T) {
    const double v = time_kernel(vla::gpu::RecurrentKind::Vla, a, T);
    const double vc = with_chunked ? time_kernel(vla::gpu::RecurrentKind::Vla, a, T, false, true) : std::numeric_limits<double>::quiet_NaN();
    const double l = time_kernel(vla::gpu::RecurrentKind::Linear, a, T);
    const double dn = time_kernel(vla::gpu::RecurrentKind::DeltaNet, a, T);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double fb = with_bwd ? time_kernel(vla::gpu::RecurrentKind::Vla, a, T, true) : nan;
    const double cfb = with_chunked ? time_kernel(vla::gpu::RecurrentKind::Vla, a, T, true, true) : nan;
    const double lfb = with_bwd ? time_kernel(vla::gpu::RecurrentKind::Linear, a, T, true) : nan;
    const double dfb = with_bwd ? time_kernel(vla::gpu::RecurrentKind::DeltaNet, a, T, true) : nan;
    const double mfb = with_chunked ? time_kernel(vla::gpu::RecurrentKind::Vla, a, T, true, true, true) : nan;
    const double vct = with_chunked ? time_kernel(vla::gpu::RecurrentKind::Vla, a, T, false, true, false, vla::ProductOperands::Tf32) : nan;
    const double sm = time_softmax(a, T, false), smfb = time_softmax(a, T, true);
    fmt::print("{:>7} {:>12.4g} {:>12.4g} {:>12.4g} {:>12.4g} {:>14.4g} {:>12.3g} {:>16.4g} {:>10.3g} {:>14.4g} {:>12.4g} {:>12.4g} {:>12.4g} {:>14.4g} {:>16.4g} {:>12.4g}\n",
               T, v, vc, l, dn, 1e3 * v / T, v / dn, fb, fb / v, cfb, lfb, dfb, sm, smfb, mfb, vct);
    table.add_row({double(a.batch), double(a.heads), double(a.d_head), double(T), v, vc, l, dn, fb, cfb, lfb, dfb, sm, smfb, mfb, vct});
    vla_f.push_back(v); vla_c.push_back(vc); vla_fb.push_back(fb); vla_cfb.push_back(cfb); sm_f.push_back(sm); sm_fb.push_back(smfb);
  }
  fmt::print("B={} H={} d={}: VLA forward becomes faster than the toolkit softmax forward at T {} (chunked: {}); "
             "VLA fwd+bwd than softmax fwd+bwd at T {} (chunked: {})\n", a.batch, a.heads, a.d_head, crossover(a.T, vla_f, sm_f),
             crossover(a.T, vla_c, sm_f), crossover(a.T, vla_fb, sm_fb), crossover(a.T, vla_cfb, sm_fb));
  if (!a.csv.empty()) table.write(a.csv);
#else
  throw std::invalid_argument("--device: this build has no CUDA path (nvcc was not found at configure time)");
#endif
}

struct StepCheckArgs {
  std::vector<std::string> precisions{"float", "double", "mp50"};
  std::vector<std::string> mixers{"vla", "deltanet", "linear"};
  int T = 2000, batch = 1, d_head = 32, reps = 5;
};

// The precisions step-check can time (a sub-list: each one instantiates every rule's step here).
using StepCheckPrecisions = vla::Precisions::sub<vla::Precision<float>, vla::Precision<double>, vla::Precision<vla::half>,
                                                 vla::Precision<vla::mp50>>;

// Median seconds of T steps of `mixer` in P without and with the check, one head, batch B.
template <class P> std::pair<double, double> time_step_check(const std::string& mixer, const StepCheckArgs& a) {
  vla::MixerConfig cfg;
  cfg.mixer = mixer;
  return vla::with_rule<P>(cfg, [&](auto rule) {
    using S = typename decltype(rule)::storage_t;
    std::mt19937_64 gen(7);
    std::normal_distribution<double> n(0.0, 1.0);
    auto random = [&](int rows, int cols) {
      vla::Mat<S> m(rows, cols);
      for (auto& e : m.reshaped()) e = vla::scalar_cast<S>(n(gen));
      return m;
    };
    std::vector<vla::HeadInputs<S>> in(a.T);  // (d_h, B) per token, as MixerLayer hands them to the rule
    for (auto& x : in) {
      x.q = random(a.d_head, a.batch); x.k = random(a.d_head, a.batch); x.v = random(a.d_head, a.batch);
      if (decltype(rule)::needs.penalty) x.u = random(a.d_head, a.batch);
      if (decltype(rule)::needs.gate) x.gate = random(decltype(rule)::needs.gate_rows(a.d_head), a.batch);
    }
    auto run = [&](bool check) {
      auto st = rule.init(a.batch, a.d_head);
      vla::Mat<S> out;
      int found = 0;
      const auto t0 = std::chrono::steady_clock::now();
      for (int t = 0; t < a.T; ++t) {
        rule.step(st, in[t], out, nullptr);
        if (check)
          for (int b = 0; b < a.batch; ++b) found += vla::first_non_finite(st, b, in[t], out) != nullptr;
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (found) throw std::runtime_error(fmt::format("bench step-check: {} in {} went non-finite", mixer, P::name()));
      return s;
    };
    std::vector<double> off, on;
    run(false);  // warm-up: allocations, caches
    for (int r = 0; r < a.reps; ++r) { off.push_back(run(false)); on.push_back(run(true)); }
    auto median = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
    return std::pair{median(off), median(on)};
  });
}

void run_step_check(const StepCheckArgs& a) {
  if (a.T < 1 || a.batch < 1 || a.d_head < 1 || a.reps < 1)
    throw std::invalid_argument("--T, --batch, --d-head, --reps: each must be >= 1");
  fmt::print("per-step non-finite check (core/rules/non_finite.hpp) vs the rule's step alone, CPU, one thread, "
             "T = {}, B = {}, d_h = {}, median of {}\n", a.T, a.batch, a.d_head, a.reps);
  fmt::print("{:>10} {:>10} {:>14} {:>14} {:>12}\n", "precision", "mixer", "step us", "step+check us", "ratio");
  for (const auto& p : a.precisions)
    for (const auto& m : a.mixers) {
      const auto [off, on] = vla::with_precision_in<StepCheckPrecisions>(p, "--precisions", [&](auto P) {
        return time_step_check<decltype(P)>(m, a);
      });
      fmt::print("{:>10} {:>10} {:>14.3f} {:>14.3f} {:>12.3f}\n", p, m, 1e6 * off / a.T, 1e6 * on / a.T, on / off);
    }
}

}  // namespace

namespace vla::cli {
void add_bench_chunked_vla(CLI::App& bench);    // cli/commands/bench_chunked_vla.cpp
void add_bench_data_parallel(CLI::App& bench);  // cli/commands/bench_data_parallel.cpp
}

namespace {

const vla::cli::RegisterCommand reg{"bench", "benchmarks (subcommands: attention, step-check, chunked-vla, data-parallel)", [](CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  app.require_subcommand(1);
  auto* att = app.add_subcommand("attention", "time the fused recurrent kernels and the toolkit softmax (forward, forward+backward) on the GPU");
  att->add_option("--device", args->device, "cuda (the only benchmarked device)");
  vla::cli::add_list_option(*att, "--T", args->T, "sequence lengths, comma separated");
  att->add_option("--batch", args->batch, "batch size B");
  att->add_option("--heads", args->heads, "heads H");
  att->add_option("--d-head", args->d_head, fmt::format("head size d ({})", fmt::join(vla::kGpuRecurrentHeads, ", ")));
  att->add_option("--reps", args->reps, "timed runs per point (median reported)");
  att->add_option("--csv", args->csv, "also write the table to this CSV file");
  att->final_callback([args] { run(*args); });
  auto sc_args = std::make_shared<StepCheckArgs>();
  auto* sc = app.add_subcommand("step-check", "time the per-step non-finite check against the rule's step alone (CPU)");
  vla::cli::add_list_option(*sc, "--precisions", sc_args->precisions, "precisions (float, double, half, mp50)");
  vla::cli::add_list_option(*sc, "--mixers", sc_args->mixers, "mixers, comma separated");
  sc->add_option("--T", sc_args->T, "steps per timed run");
  sc->add_option("--batch", sc_args->batch, "batch size B");
  sc->add_option("--d-head", sc_args->d_head, "head size d_h");
  sc->add_option("--reps", sc_args->reps, "timed runs with and without the check (median reported)");
  sc->final_callback([sc_args] { run_step_check(*sc_args); });
  vla::cli::add_bench_chunked_vla(app);
  vla::cli::add_bench_data_parallel(app);
}};

}  // namespace
