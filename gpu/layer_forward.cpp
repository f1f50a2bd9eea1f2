// vla::gpu::layer_forward (gpu/layer_forward.hpp): the single-head .npy layer contract on the GPU.
// Projections by gpu/affine.cu, the recurrence by the fused kernel of gpu/recurrent_forward.cu or the
// chunked VLA forward of gpu/chunked_vla_forward.cu, the output projection by gpu/affine.cu again;
// everything fp32 on the device.
#include "gpu/layer_forward.hpp"

#include "core/knob.hpp"
#include "core/rules/gpu_support.hpp"
#include "gpu/affine.hpp"
#include "gpu/chunked_vla_forward.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/recurrent_forward.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace vla::gpu {
namespace {

// Row-major copy of an Eigen (column-major) matrix: rows x cols floats.
std::vector<float> row_major(const Mat<float>& m) {
  std::vector<float> h(std::size_t(m.rows()) * m.cols());
  for (Eigen::Index r = 0; r < m.rows(); ++r)
    for (Eigen::Index c = 0; c < m.cols(); ++c) h[std::size_t(r) * m.cols() + c] = m(r, c);
  return h;
}
std::vector<float> to_vector(const Vec<float>& v) { return std::vector<float>(v.data(), v.data() + v.size()); }

}  // namespace

RecurrentForm recurrent_form(const std::string& name) {
  if (name == "auto") return RecurrentForm::Auto;
  if (name == "fused") return RecurrentForm::Fused;
  if (name == "chunked") return RecurrentForm::Chunked;
  throw std::invalid_argument(fmt::format("--recurrent-form: unknown form '{}' (allowed: {})", name, kRecurrentFormNames));
}

std::string_view form_name(RecurrentForm f) {
  return f == RecurrentForm::Chunked ? "chunked" : f == RecurrentForm::Fused ? "fused" : "auto";
}

std::string chunked_refusal(const GpuKernel& k, int d) {
  // What the chunked forward covers (its header): VLA's kernel with k_hat normalised (the `vla` preset),
  // its head widths, eps <= 1 (the clamp never fires).
  if (!(k.path == GpuPath::Recurrent && k.kind == RecurrentKind::Vla && k.params.normalise_key))
    return "--recurrent-form: chunked runs the `vla` mixer only (allowed here: auto, fused)";
  if (std::find(std::begin(kChunkedVlaHeads), std::end(kChunkedVlaHeads), d) == std::end(kChunkedVlaHeads))
    return fmt::format("--recurrent-form: chunked runs d_head {} only, got {} (allowed here: auto, fused)", fmt::join(kChunkedVlaHeads, ", "), d);
  if (!(k.params.eps <= 1.f))
    return fmt::format("--recurrent-form: chunked needs --eps <= 1 (got {}: the delta clamp could fire); use fused", k.params.eps);
  return {};
}

bool chunked_serves(const GpuKernel& k, int d) { return chunked_refusal(k, d).empty(); }

RecurrentForm resolve_form(RecurrentForm f, const GpuKernel& k, int d, int T, bool trace) {
  if (f == RecurrentForm::Fused) return f;
  if (f == RecurrentForm::Chunked) {
    if (const std::string why = chunked_refusal(k, d); !why.empty()) throw std::invalid_argument(why);
    // A layer's own condition: the chunked forward keeps no per-token S or A.
    if (trace) throw std::invalid_argument("--recurrent-form: chunked keeps no per-step trace; leave out --trace or use fused");
    return f;
  }
  return chunked_serves(k, d) && !trace && T >= kChunkedLayerMinT ? RecurrentForm::Chunked : RecurrentForm::Fused;
}

Mat<float> layer_forward(const MixerConfig& cfg, const LayerShape& shape, const MixerWeights<float>& w,
                         const Mat<float>& X, std::vector<StepStats>* trace, RecurrentForm form, RecurrentForm* ran,
                         ProductOperands products) {
  // The rule's kernel and its parameters (its GPU trait); throws naming the flag and what is allowed.
  const GpuKernel kernel = gpu_kernel_for(cfg, shape.d_head, GpuUse::LayerForward);
  const RecurrentKind kind = kernel.kind;
  const int d = shape.d_head, dm = shape.d_model, T = static_cast<int>(X.rows());
  const RecurrentForm use = resolve_form(form, kernel, d, T, trace != nullptr);
  if (products != ProductOperands::Full && use != RecurrentForm::Chunked)
    throw std::invalid_argument(fmt::format("--products: '{}' sets how the chunked recurrence's products read their operands, and "
                                            "this request runs the fused kernel (--recurrent-form chunked: the `vla` mixer at "
                                            "d_head 32, no --trace)",
                                            knob_value_name(products)));
  if (ran) *ran = use;
  if (shape.heads != 1) throw std::invalid_argument(fmt::format("--heads: the layer contract is single-head (got {})", shape.heads));
  // The same weight-shape checks as the CPU path (throws naming the weight).
  with_rule<Precision<float>>(cfg, [&](auto rule) { MixerLayer<decltype(rule)>(shape, rule, w); return 0; });
  if (X.cols() != dm) throw std::invalid_argument(fmt::format("input: X has {} columns, expected d_model = {}", X.cols(), dm));
  if (!all_finite(X)) throw std::invalid_argument("input: X contains a non-finite value");

  auto dev = [](const Mat<float>& m) { return DeviceBuffer(row_major(m)); };
  auto bias = [](const Vec<float>& v) { return DeviceBuffer(to_vector(v)); };
  const DeviceBuffer dX = dev(X);  // (T, d_model)
  DeviceBuffer dQ(std::size_t(T) * d), dK(std::size_t(T) * d), dV(std::size_t(T) * d);  // (T, d) = (1, 1, T, d)
  DeviceBuffer dO(std::size_t(T) * d), dY(std::size_t(T) * dm);                         // (T, d), (T, d_model)
  const DeviceBuffer Wq = dev(w.Wq), Wk = dev(w.Wk), Wv = dev(w.Wv), Wo = dev(w.Wo);
  const DeviceBuffer bq = bias(w.bq), bk = bias(w.bk), bv = bias(w.bv), bo = bias(w.bo);
  check(affine_rows(dX.get(), T, dm, Wq.get(), bq.get(), d, dQ.get()), "affine q");
  check(affine_rows(dX.get(), T, dm, Wk.get(), bk.get(), d, dK.get()), "affine k");
  check(affine_rows(dX.get(), T, dm, Wv.get(), bv.get(), d, dV.get()), "affine v");

  RecurrentTensors x;
  x.q = dQ.get(); x.k = dK.get(); x.v = dV.get(); x.o = dO.get();
  x.B = 1; x.H = 1; x.T = T; x.d = d;
  DeviceBuffer dU, dG, dStats;
  if (kind == RecurrentKind::Vla) {  // u_raw = W_u k_raw + b_u (Alg. 1 line 10), (T, d)
    dU = DeviceBuffer(std::size_t(T) * d);
    const DeviceBuffer Wu = dev(w.Wu), bu = bias(w.bu);
    check(affine_rows(dK.get(), T, d, Wu.get(), bu.get(), d, dU.get()), "affine u");
    x.u = dU.get();
    check(cudaDeviceSynchronize(), "affine u (sync)");
  }
  if (kernel.gated) {  // DeltaNet: g = w_g . x + b_g, (T)
    dG = DeviceBuffer(std::size_t(T));
    const DeviceBuffer Wg = dev(w.Wg), bg = bias(w.bg);
    check(affine_rows(dX.get(), T, dm, Wg.get(), bg.get(), 1, dG.get()), "affine gate");
    x.g = dG.get();
    check(cudaDeviceSynchronize(), "affine gate (sync)");
  }
  if (trace) { dStats = DeviceBuffer(std::size_t(T) * 3); x.stats = dStats.get(); }

  if (use == RecurrentForm::Chunked) check(chunked_vla_forward(x, kernel.params, 0, 0, nullptr, nullptr, products), "chunked_vla_forward");
  else check(recurrent_forward(kind, x, kernel.params), "recurrent_forward");
  check(affine_rows(dO.get(), T, d, Wo.get(), bo.get(), dm, dY.get()), "affine out");
  check(cudaDeviceSynchronize(), "layer_forward (sync)");

  const std::vector<float> y = dY.download();
  Mat<float> Y(T, dm);  // (T, d_model)
  for (int t = 0; t < T; ++t)
    for (int c = 0; c < dm; ++c) Y(t, c) = y[std::size_t(t) * dm + c];
  if (trace) {
    const std::vector<float> s = dStats.download();
    trace->assign(T, StepStats{});
    for (int t = 0; t < T; ++t) {
      StepStats& st = (*trace)[t];
      st.S_fro = s[3 * t];
      st.A_fro = s[3 * t + 1];
      st.delta = s[3 * t + 2];
      if (kind == RecurrentKind::Vla) st.guard_fired = !(st.delta >= cfg.penalty.eps);  // line 13's clamp fired
    }
  }
  return Y;
}

}  // namespace vla::gpu
