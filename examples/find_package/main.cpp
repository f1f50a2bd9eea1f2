// One VLA layer (Algorithm 1, the paper's defaults) with random weights over T random tokens, in double
// and in the 50-digit ground truth mp50, through the installed package; prints how far apart they are.
#include "core/layers/layer_forward.hpp"

#include <fmt/format.h>

#include <random>

int main() {
  const vla::MixerConfig cfg;  // mixer "vla"
  const vla::LayerShape shape{.d_model = 8, .d_head = 4};
  const auto w = vla::random_weights<double>(shape, vla::rule_needs(cfg), 42);  // N(0, 1/fan_in)
  std::mt19937_64 gen(43);
  const vla::Mat<double> X = vla::gaussian_matrix(gen, 16, shape.d_model, 1.0);  // (T, d_model)
  const vla::Mat<double> y_double = vla::layer_forward("double", cfg, shape, w, X).Y;  // (T, d_model)
  const vla::Mat<double> y_mp50 = vla::layer_forward("mp50", cfg, shape, w, X).Y;
  const double diff = (y_double - y_mp50).cwiseAbs().maxCoeff() / y_mp50.cwiseAbs().maxCoeff();
  fmt::print("vla layer, T = {}, d_model = {}: max |y_double - y_mp50| / max |y_mp50| = {:.2e}\n", X.rows(), X.cols(), diff);
  // Double rounds each operation by at most u = 2^-53; a step does O(d_model) of them per entry, so T steps
  // of this well-conditioned layer stay within T * d_model * u (1.4e-14) times a small constant.
  return diff < 16 * X.rows() * X.cols() * 0x1p-53 ? 0 : 1;
}
