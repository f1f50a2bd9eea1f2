// vla::gpu::layer_forward (gpu/layer_forward.cpp: the projections by gpu/affine.cu, the fused kernel,
// W_o), i.e. what `vla layer-forward --device cuda` runs, against the CPU MixerLayer in double on the
// same fp32-valued weights and inputs. The fused kernels have their own tests; this one covers the
// affine kernel (with and without biases), the (T, d_model) <-> (1, 1, T, d) layouts and the trace.
// Tagged [gpu]; passes with a warning and checks nothing where no CUDA device is visible (CI).
#include "core/knob.hpp"
#include "core/layers/mixer_layer.hpp"
#include "core/rules/registry.hpp"
#include "gpu/device_query.hpp"
#include "gpu/layer_forward.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <random>

namespace {

using vla::Mat;
using vla::Vec;

vla::MixerWeights<float> weights(const vla::LayerShape& s, vla::Needs needs, bool biases, std::uint64_t seed) {
  auto w = vla::random_weights<float>(s, needs, seed);
  if (!biases) return w;
  std::mt19937_64 gen(seed + 1);
  std::normal_distribution<float> n(0.f, 0.5f);
  auto vec = [&](long len) { Vec<float> v(len); for (auto& e : v) e = n(gen); return v; };
  w.bq = vec(s.d_head); w.bk = vec(s.d_head); w.bv = vec(s.d_head); w.bo = vec(s.d_model);
  if (needs.penalty) w.bu = vec(s.d_head);
  if (needs.gate) w.bg = vec(1);
  return w;
}

double rel(const Mat<double>& a, const Mat<double>& b) { return (a - b).norm() / b.norm(); }

void check_layer(const std::string& mixer, int d, int T, bool biases,
                 vla::gpu::RecurrentForm form = vla::gpu::RecurrentForm::Fused, bool with_trace = true,
                 vla::ProductOperands products = vla::ProductOperands::Full) {
  if (vla::gpu::device_count() == 0) { WARN("no CUDA device visible: the GPU layer test is skipped"); return; }
  vla::MixerConfig cfg;
  cfg.mixer = mixer;
  const vla::LayerShape shape{d, d, 1, 1};  // 001: single head, d_head = d_model
  vla::with_rule<vla::Precision<double>>(cfg, [&](auto rule) {
    using Rule = decltype(rule);
    const auto w = weights(shape, Rule::needs, biases, 1000 + d + T);
    std::mt19937_64 gen(7 * d + T);
    std::normal_distribution<float> n(0.f, 1.f);
    Mat<float> X(T, d);
    for (long i = 0; i < X.size(); ++i) X.data()[i] = n(gen);

    std::vector<vla::StepStats> gtrace;
    vla::gpu::RecurrentForm ran{};
    const Mat<double> Yg =
        vla::cast_matrix<double>(vla::gpu::layer_forward(cfg, shape, w, X, with_trace ? &gtrace : nullptr, form, &ran, products));
    // Auto must take the chunked form exactly where it serves the request from kChunkedLayerMinT on.
    const bool chunked = form == vla::gpu::RecurrentForm::Chunked ||
                         (form == vla::gpu::RecurrentForm::Auto && mixer == "vla" && d == 32 && !with_trace &&
                          T >= vla::gpu::kChunkedLayerMinT);
    CHECK(ran == (chunked ? vla::gpu::RecurrentForm::Chunked : vla::gpu::RecurrentForm::Fused));
    const vla::MixerLayer<Rule> layer(shape, rule, w.template cast<double>());
    vla::LayerTrace ctrace;
    const Mat<double> Yc = layer.forward({vla::cast_matrix<double>(X)}, &ctrace)[0];

    // fp32 bound: the recurrence's T d u (as the fused-kernel tests) plus one d_model-long dot product
    // for each of the four projections. A wrong layout or a dropped bias gives an O(1) error.
    const double tol = (double(T) * d + 4.0 * d) * std::ldexp(1.0, -24);
    REQUIRE(Yg.allFinite());  // NaN never passes: the comparison below would be false anyway, said here
    const double e = rel(Yg, Yc);
    WARN(mixer << " d=" << d << " T=" << T << (biases ? " biases" : " no biases") << " " << vla::gpu::form_name(ran) << ", "
               << vla::knob_value_name(products) << " products: rel err Y " << e << " (bound " << tol << ")");
    if (products == vla::ProductOperands::Full) {
      CHECK(e < tol);
    } else {
      // One-pass TF32 products round each operand at 2^-11 (the kernel's own test holds them to the CPU emulation
      // of that pass): an error above 2^-20 (the full products' is ~3e-8 here) says the mode reached the kernel,
      // one within 16 units of 2^-11 that nothing else broke.
      CHECK(e > std::ldexp(1.0, -20));
      CHECK(e < 16 * std::ldexp(1.0, -11));
    }
    if (!with_trace) return;

    // The trace: ||S_t||_F (and ||A_t||_F for VLA) step by step, same bound relative to each value.
    REQUIRE(gtrace.size() == std::size_t(T));
    for (int t = 0; t < T; ++t) {
      const auto& g = gtrace[t];
      const auto& c = ctrace.at(t, 0, 0);
      CHECK(std::abs(g.S_fro - c.S_fro) <= tol * std::abs(c.S_fro));
      if (mixer == "vla") CHECK(std::abs(g.A_fro - c.A_fro) <= tol * std::abs(c.A_fro));
    }
  });
}

}  // namespace

TEST_CASE("GPU layer-forward equals the CPU MixerLayer in double within the fp32 bound", "[gpu]") {
  for (const std::string mixer : {"vla", "linear", "deltanet"})
    for (int d : {16, 32, 64, 96, 128})
      for (bool biases : {false, true}) check_layer(mixer, d, d >= 96 ? 40 : 75, biases);
}

TEST_CASE("GPU layer-forward through the chunked VLA forward equals the CPU MixerLayer in double", "[gpu]") {
  // A failure: the chunked form is wired to the layer wrongly (layout, u, parameters), or auto picks the
  // wrong kernel (checked inside: chunked for vla at d = 32 from kChunkedLayerMinT on without a trace).
  using vla::gpu::RecurrentForm;
  const int T = vla::gpu::kChunkedLayerMinT + 37;
  check_layer("vla", 32, 75, true, RecurrentForm::Chunked, false);
  check_layer("vla", 32, 75, true, RecurrentForm::Chunked, false, vla::ProductOperands::Tf32);  // --products tf32
  check_layer("vla", 32, T, true, RecurrentForm::Auto, false);  // auto: chunked
  check_layer("vla", 32, T, false, RecurrentForm::Auto, true);  // a trace: fused
  check_layer("vla", 64, T, false, RecurrentForm::Auto, false); // no chunked kernel at d = 64: fused
  check_layer("linear", 32, T, false, RecurrentForm::Auto, false);
}

TEST_CASE("GPU layer-forward rejects what its kernels do not implement, naming the option", "[layer-forward]") {
  // Not tagged [gpu]: the checks come before any CUDA call, so CI runs it without a device.
  const vla::LayerShape shape{32, 32, 1, 1};
  const Mat<float> X = Mat<float>::Zero(4, 32);
  vla::MixerConfig cfg;
  cfg.mixer = "softmax";
  auto w = vla::random_weights<float>(shape, vla::Needs{}, 1);
  CHECK_THROWS_WITH(vla::gpu::layer_forward(cfg, shape, w, X, nullptr), Catch::Contains("--mixer"));
  cfg.mixer = "linear";
  const vla::LayerShape odd{24, 24, 1, 1};
  CHECK_THROWS_WITH(vla::gpu::layer_forward(cfg, odd, vla::random_weights<float>(odd, vla::Needs{}, 1), Mat<float>::Zero(4, 24), nullptr),
                    Catch::Contains("--d-head"));
  // The chunked form where it cannot serve: another mixer, another width, a trace, vla-no-knorm.
  using vla::gpu::RecurrentForm;
  std::vector<vla::StepStats> trace;
  CHECK_THROWS_WITH(vla::gpu::layer_forward(cfg, shape, w, X, nullptr, RecurrentForm::Chunked), Catch::Contains("--recurrent-form"));
  cfg.mixer = "vla";
  const auto wv = vla::random_weights<float>(shape, vla::Needs{.penalty = true}, 1);
  CHECK_THROWS_WITH(vla::gpu::layer_forward(cfg, shape, wv, X, &trace, RecurrentForm::Chunked), Catch::Contains("--trace"));
  const vla::LayerShape wide{64, 64, 1, 1};
  CHECK_THROWS_WITH(vla::gpu::layer_forward(cfg, wide, vla::random_weights<float>(wide, vla::Needs{.penalty = true}, 1),
                                            Mat<float>::Zero(4, 64), nullptr, RecurrentForm::Chunked),
                    Catch::Contains("d_head"));
  cfg.penalty.eps = 2.0;  // the clamp could fire: the fused kernel's, never the chunked form's
  CHECK_THROWS_WITH(vla::gpu::layer_forward(cfg, shape, wv, X, nullptr, RecurrentForm::Chunked), Catch::Contains("--eps"));
  cfg = vla::MixerConfig{};
  cfg.mixer = "vla-no-knorm";
  CHECK_THROWS_WITH(vla::gpu::layer_forward(cfg, shape, wv, X, nullptr, RecurrentForm::Chunked), Catch::Contains("`vla` mixer"));
  CHECK_THROWS_WITH(vla::gpu::recurrent_form("flash"), Catch::Contains("--recurrent-form") && Catch::Contains("auto, fused, chunked"));
  // One-pass TF32 products where the recurrence is the fused kernel's (asked for, or auto's choice below
  // kChunkedLayerMinT).
  cfg = vla::MixerConfig{};
  cfg.mixer = "vla";
  CHECK_THROWS_WITH(vla::gpu::layer_forward(cfg, shape, wv, X, nullptr, RecurrentForm::Fused, nullptr, vla::ProductOperands::Tf32),
                    Catch::Contains("--products"));
  CHECK_THROWS_WITH(vla::gpu::layer_forward(cfg, shape, wv, X, nullptr, RecurrentForm::Auto, nullptr, vla::ProductOperands::Tf32),
                    Catch::Contains("--products"));
}
