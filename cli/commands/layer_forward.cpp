// `vla layer-forward`: one single-head mixer layer over X (T, d_model) read from .npy, output
// Y (T, d_model) as float64 .npy and optionally a per-step trace CSV. The contract (files, shapes,
// defaults) is docs/recurrences.md, "The .npy contract of layer-forward".
#include "cli/command.hpp"
#include "cli/mixer_options.hpp"
#include "core/io/csv.hpp"
#include "core/io/npy.hpp"
#include "core/knob.hpp"
#include "core/layers/layer_forward.hpp"
#include "core/layers/single_head_weights.hpp"
#include "core/product_operands.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <optional>

#if defined(VLA_HAVE_CUDA) && defined(VLA_GPU_LAYER_FORWARD) && __has_include("gpu/layer_forward.hpp")
#include "gpu/layer_forward.hpp"
#define VLA_LAYER_FORWARD_GPU 1
#endif

namespace {

namespace fs = std::filesystem;
using vla::Mat;

struct Args {
  vla::MixerConfig cfg;
  std::string precision = "double";
  std::string params;
  std::string input;
  std::string output;
  std::string trace;
  std::string device = "cpu";
  std::string form = "auto";  // --recurrent-form, cuda only (gpu/layer_forward.hpp)
  std::string products = "full";  // --products, cuda's chunked recurrence only (core/product_operands.hpp)
  vla::ProductOperands product_operands = vla::ProductOperands::Full;  // --products, parsed by run()
  std::string ran;            // the form that ran, for the closing line
};

// DIR/name.npy as a named array; absent: nullopt, or for a required array read_npy's error naming the file.
std::optional<vla::NamedArray> load_array(const fs::path& dir, const std::string& name, bool required) {
  const fs::path p = dir / (name + ".npy");
  std::error_code ec;
  if (!required && !fs::exists(p, ec)) return std::nullopt;
  auto a = vla::io::read_npy(p, "--params");
  return vla::NamedArray{std::move(a.data), a.ndim, p.string()};
}

vla::LayerForwardResult run_gpu([[maybe_unused]] Args& a, [[maybe_unused]] const vla::LayerShape& shape,
                                [[maybe_unused]] const vla::MixerWeights<double>& w,
                                [[maybe_unused]] const Mat<double>& X) {
#ifdef VLA_LAYER_FORWARD_GPU
  // The kernels compute in fp32: the same input range as the CPU's float, and every output row checked
  // (a kernel cannot stop at the first non-finite step; the first row it reaches is the step reported).
  vla::check_input_range<float>(X, "float (the CUDA path)");
  std::vector<vla::StepStats> trace;
  vla::gpu::RecurrentForm ran{};
  const Mat<float> Y = vla::gpu::layer_forward(a.cfg, shape, w.cast<float>(), vla::cast_matrix<float>(X),
                                               a.trace.empty() ? nullptr : &trace, vla::gpu::recurrent_form(a.form), &ran,
                                               a.product_operands);
  a.ran = vla::gpu::form_name(ran);
  if (a.product_operands != vla::ProductOperands::Full) a.ran += ", " + a.products + " products";
  if (a.trace.empty()) trace.assign(std::size_t(Y.rows()), vla::StepStats{});  // not written: no --trace
  for (Eigen::Index t = 0; t < Y.rows(); ++t)
    if (!vla::all_finite(Y.row(t))) throw vla::NonFiniteError(int(t) + 1, 0, -1, "y_t", "float (the CUDA path)");
  return {vla::cast_matrix<double>(Y), std::move(trace)};
#elif defined(VLA_HAVE_CUDA)
  throw std::invalid_argument("--device: cuda is not available yet (this build has CUDA but no GPU layer-forward "
                              "implementation; allowed now: cpu)");
#else
  throw std::invalid_argument("--device: cuda is not available (this build has no CUDA path: nvcc was not found at "
                              "configure time; allowed: cpu)");
#endif
}

void run(Args& a) {
  auto& c = a.cfg;
  if (a.device != "cpu" && a.device != "cuda")
    throw std::invalid_argument(fmt::format("--device: unknown device '{}' (allowed: cpu, cuda)", a.device));
  if (a.device == "cpu" && a.form != "auto")
    throw std::invalid_argument(fmt::format("--recurrent-form: '{}' picks a CUDA kernel; it needs --device cuda", a.form));
  a.product_operands = vla::parse_knob_value<vla::ProductOperands>(a.products, "--products");
  if (a.product_operands != vla::ProductOperands::Full && a.device == "cpu")
    throw std::invalid_argument(fmt::format("--products: '{}' is how a CUDA kernel's products read their operands; it needs --device cuda",
                                            a.products));
  // Validate the names and numbers before touching any file (each throws naming its parameter).
  vla::with_precision(a.precision, [](auto) {});
  // with_rule accepts exactly the names of kMixerNames ("a, b, c"); check against that list.
  if (std::string(", ") .append(vla::kMixerNames).append(",").find(", " + c.mixer + ",") == std::string::npos)
    throw std::invalid_argument(fmt::format("--mixer: unknown mixer '{}' (allowed: {})", c.mixer, vla::kMixerNames));

  // X: (T, d_model).
  auto xa = vla::io::read_npy(a.input, "--input");
  const vla::NamedArray x{std::move(xa.data), xa.ndim, a.input};
  vla::check_layer_input(x, "--input");
  const Mat<double>& X = x.data;
  const long T = X.rows(), d_model = X.cols();

  // Weights: shapes as MixerWeights documents with H = 1 (core/layers/single_head_weights.hpp).
  const fs::path dir = a.params;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw std::invalid_argument(fmt::format("--params: '{}' is not a directory", a.params));
  const auto [shape, w] = vla::single_head_weights(
      c, d_model, [&](const std::string& name, bool required) { return load_array(dir, name, required); }, "--params",
      "--input");
  const long d_head = shape.d_head;

  const vla::LayerForwardResult res =
      a.device == "cuda" ? run_gpu(a, shape, w, X) : vla::layer_forward(a.precision, c, shape, w, X);
  if (res.Y.rows() != T || res.Y.cols() != d_model || long(res.trace.size()) != T)
    throw std::runtime_error("layer-forward: internal error, result has the wrong shape");

  // Everything is computed; now the files, whole or not at all: both are staged next to their
  // targets (each staged file itself written atomically), then renamed; any failure removes them.
  const std::string bytes = vla::io::encode_npy(res.Y);
  std::optional<vla::io::CsvTable> table;
  if (!a.trace.empty()) {
    table.emplace(std::vector<std::string>{"t", "S_fro", "A_fro", "delta", "e_norm"});
    for (long t = 0; t < T; ++t) {
      const auto& s = res.trace[t];
      table->add_row({double(t + 1), s.S_fro, s.A_fro, s.delta, s.e_norm});  // t = 1..T as in Alg. 1
    }
  }
  const std::string suffix = fmt::format(".staged.{}", ::getpid());
  const fs::path y_stage = a.output + suffix, tr_stage = a.trace + suffix;
  bool trace_committed = false;
  try {
    vla::io::write_atomically(y_stage, [&](std::ostream& o) { o.write(bytes.data(), std::streamsize(bytes.size())); },
                              std::ios::out | std::ios::binary);
    if (table) {
      table->write(tr_stage);
      fs::rename(tr_stage, a.trace);
      trace_committed = true;
    }
    fs::rename(y_stage, a.output);
  } catch (...) {
    fs::remove(y_stage, ec);
    if (table) fs::remove(tr_stage, ec);
    if (trace_committed) fs::remove(a.trace, ec);  // Y could not be committed: take the trace back too
    throw;
  }
  fmt::print("layer-forward: mixer {}, precision {}, device {}{}, T = {}, d_model = {}, d_head = {}: wrote {}{}\n", c.mixer,
             a.precision, a.device, a.ran.empty() ? "" : " (" + a.ran + " recurrence)", T, d_model, d_head, a.output,
             a.trace.empty() ? "" : " and " + a.trace);
}

const vla::cli::RegisterCommand reg{
    "layer-forward",
    "one single-head mixer layer over X.npy (T, d_model) -> Y.npy (T, d_model), params from .npy files",
    [](CLI::App& app) {
      auto a = std::make_shared<Args>();
      auto& c = a->cfg;
      app.add_option("--mixer", c.mixer, std::string("memory rule: ") + std::string(vla::kMixerNames))->capture_default_str();
      app.add_option("--precision", a->precision, std::string("storage[+compute]: ") + std::string(vla::kPrecisionNames))
          ->capture_default_str();
      app.add_option("--params", a->params,
                     "folder with Wq.npy Wk.npy Wv.npy (d_head, d_model), Wo.npy (d_model, d_head), Wu.npy "
                     "(rank*d_head, d_head; VLA), Wg.npy (1, d_model; DeltaNet, absent = 0), biases b*.npy (absent = 0)")
          ->required();
      app.add_option("--input", a->input, "X.npy, (T, d_model), float32 or float64")->required();
      app.add_option("--output", a->output, "Y.npy to write, (T, d_model) float64")->required();
      app.add_option("--trace", a->trace, "optional CSV: t,S_fro,A_fro,delta,e_norm after each step (NaN = n/a)");
      vla::cli::add_mixer_options(app, c);
      app.add_option("--device", a->device, "cpu | cuda (fp32 GPU kernels)")->capture_default_str();
      app.add_option("--recurrent-form", a->form,
                     "cuda: auto | fused | chunked (the chunkwise-parallel VLA forward: the `vla` mixer, no --trace; auto takes "
                     "it where it serves the request and was measured faster: gpu/layer_forward.hpp)")
          ->capture_default_str();
      app.add_option("--products", a->products,
                     "cuda, chunked recurrence: full | tf32 (one-pass TF32 tensor-core products, ~5e-4 relative error: "
                     "core/product_operands.hpp, docs/chunkwise-vla-gpu.md)")
          ->capture_default_str();
      app.final_callback([a] { run(*a); });
    }};

}  // namespace
