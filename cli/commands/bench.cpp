// `vla bench attention --device cuda`: times the fused forward kernels (VLA, linear attention, DeltaNet)
// and each one's forward+backward (gpu/recurrent_backward.hpp)
// with CUDA events, median of --reps timed runs after 2 warm-ups, on device-generated random inputs
// (uniform, unit variance; never zeros). Prints a table and, with --csv, writes it (atomically) for
// gpu/bench_torch.py, which adds PyTorch's SDPA and the PyTorch loop of Algorithm 1 and prints ratios.
#include "cli/command.hpp"
#include "core/io/csv.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef VLA_HAVE_CUDA
#include "gpu/cuda_check.hpp"
#include "gpu/device_query.hpp"
#include "gpu/recurrent_backward.hpp"
#include "gpu/recurrent_forward.hpp"
#endif

namespace {

struct BenchArgs {
  std::string device = "cuda";
  std::vector<int> T{1024, 4096, 16384, 65536};
  int batch = 8, heads = 4, d_head = 32, reps = 10;
  std::string csv;
};

#ifdef VLA_HAVE_CUDA
// Median milliseconds of one fused forward over (B, H, T, d) inputs; with `backward`, of the forward
// followed by the fused backward (dL/do random, the workspace allocated once outside the timing).
double time_kernel(vla::gpu::RecurrentKind kind, const BenchArgs& a, int T, bool backward = false) {
  using vla::gpu::check;
  const std::size_t n = std::size_t(a.batch) * a.heads * T * a.d_head;
  vla::gpu::DeviceBuffer q(n), k(n), v(n), u(n), o(n), g(std::size_t(a.batch) * a.heads * T);  // (B, H, T, d), g (B, H, T)
  unsigned long long seed = 1;
  for (auto* b : {&q, &k, &v, &u, &g}) check(vla::gpu::fill_random(b->get(), (long long)b->size(), seed++), "fill_random");
  vla::gpu::RecurrentTensors x;
  x.q = q.get(); x.k = k.get(); x.v = v.get(); x.u = u.get(); x.g = g.get(); x.o = o.get();
  x.B = a.batch; x.H = a.heads; x.T = T; x.d = a.d_head;
  vla::gpu::DeviceBuffer dout, dq, dk, dv, du, dg, ws;  // (B, H, T, d) each, dg (B, H, T); ws: the backward's checkpoints
  vla::gpu::RecurrentGrads grads;
  if (backward) {
    dout = vla::gpu::DeviceBuffer(n); dq = vla::gpu::DeviceBuffer(n); dk = vla::gpu::DeviceBuffer(n);
    dv = vla::gpu::DeviceBuffer(n); du = vla::gpu::DeviceBuffer(n); dg = vla::gpu::DeviceBuffer(g.size());
    ws = vla::gpu::DeviceBuffer(vla::gpu::recurrent_backward_workspace_floats(a.batch, a.heads, T, a.d_head));
    check(vla::gpu::fill_random(dout.get(), (long long)n, seed++), "fill_random");
    grads.dout = dout.get(); grads.dq = dq.get(); grads.dk = dk.get(); grads.dv = dv.get(); grads.du = du.get(); grads.dg = dg.get();
  }
  cudaEvent_t e0, e1;
  check(cudaEventCreate(&e0), "cudaEventCreate");
  check(cudaEventCreate(&e1), "cudaEventCreate");
  std::vector<double> ms;
  for (int r = 0; r < 2 + a.reps; ++r) {
    check(cudaEventRecord(e0), "cudaEventRecord");
    check(vla::gpu::recurrent_forward(kind, x, {}), "recurrent_forward");
    if (backward) check(vla::gpu::recurrent_backward(kind, x, grads, {}, ws.get()), "recurrent_backward");
    check(cudaEventRecord(e1), "cudaEventRecord");
    check(cudaEventSynchronize(e1), "cudaEventSynchronize");
    float t = 0;
    check(cudaEventElapsedTime(&t, e0, e1), "cudaEventElapsedTime");
    if (r >= 2) ms.push_back(t);  // the first two are warm-up (module load, clocks)
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}
#endif

void run(const BenchArgs& a) {
  if (a.device != "cuda") throw std::invalid_argument(fmt::format("--device: '{}' (allowed: cuda)", a.device));
  for (int t : a.T) if (t < 1) throw std::invalid_argument(fmt::format("--T: {} (allowed: integers >= 1)", t));
  if (a.batch < 1 || a.heads < 1) throw std::invalid_argument("--batch/--heads: must be >= 1");
  if (a.d_head != 16 && a.d_head != 32 && a.d_head != 64 && a.d_head != 128)
    throw std::invalid_argument(fmt::format("--d-head: {} (allowed: 16, 32, 64, 128)", a.d_head));
  if (a.reps < 1) throw std::invalid_argument(fmt::format("--reps: {} (allowed: >= 1)", a.reps));
#ifdef VLA_HAVE_CUDA
  if (vla::gpu::device_count() == 0) throw std::runtime_error("no CUDA device visible");
  fmt::print("{}", vla::gpu::describe_devices());
  fmt::print("fused forward, fp32, B={} H={} d={}, median of {} CUDA-event timed runs after 2 warm-ups\n", a.batch, a.heads,
             a.d_head, a.reps);
  // The fused backward exists at every d the forward has (16, 32, 64, 128; gpu/recurrent_backward.hpp).
  const bool with_bwd = true;
  fmt::print("{:>7} {:>12} {:>12} {:>12} {:>14} {:>12} {:>16} {:>10} {:>12} {:>12}\n", "T", "vla ms", "linear ms", "deltanet ms",
             "vla us/step", "vla/deltanet", "vla fwd+bwd ms", "fb/fwd", "lin fwd+bwd", "dn fwd+bwd");
  vla::io::CsvTable table({"B", "H", "d", "T", "vla_ms", "linear_ms", "deltanet_ms", "vla_fwdbwd_ms", "linear_fwdbwd_ms",
                           "deltanet_fwdbwd_ms"});
  for (int T : a.T) {
    const double v = time_kernel(vla::gpu::RecurrentKind::Vla, a, T);
    const double l = time_kernel(vla::gpu::RecurrentKind::Linear, a, T);
    const double dn = time_kernel(vla::gpu::RecurrentKind::DeltaNet, a, T);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double fb = with_bwd ? time_kernel(vla::gpu::RecurrentKind::Vla, a, T, true) : nan;
    const double lfb = with_bwd ? time_kernel(vla::gpu::RecurrentKind::Linear, a, T, true) : nan;
    const double dfb = with_bwd ? time_kernel(vla::gpu::RecurrentKind::DeltaNet, a, T, true) : nan;
    fmt::print("{:>7} {:>12.4g} {:>12.4g} {:>12.4g} {:>14.4g} {:>12.3g} {:>16.4g} {:>10.3g} {:>12.4g} {:>12.4g}\n", T, v, l, dn,
               1e3 * v / T, v / dn, fb, fb / v, lfb, dfb);
    table.add_row({double(a.batch), double(a.heads), double(a.d_head), double(T), v, l, dn, fb, lfb, dfb});
  }
  if (!a.csv.empty()) table.write(a.csv);
#else
  throw std::invalid_argument("--device: this build has no CUDA path (nvcc was not found at configure time)");
#endif
}

const vla::cli::RegisterCommand reg{"bench", "benchmarks (subcommand: attention)", [](CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  app.require_subcommand(1);
  auto* att = app.add_subcommand("attention", "time the fused recurrent kernels (forward, forward+backward) on the GPU");
  att->add_option("--device", args->device, "cuda (the only benchmarked device)");
  att->add_option("--T", args->T, "sequence lengths, comma separated")->delimiter(',');
  att->add_option("--batch", args->batch, "batch size B");
  att->add_option("--heads", args->heads, "heads H");
  att->add_option("--d-head", args->d_head, "head size d (16, 32, 64, 128)");
  att->add_option("--reps", args->reps, "timed runs per point (median reported)");
  att->add_option("--csv", args->csv, "also write the table to this CSV file");
  att->final_callback([args] { run(*args); });
}};

}  // namespace
