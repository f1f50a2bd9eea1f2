#pragma once
// `vla layer-forward` on the CPU: one single-head mixer layer over one sequence, in any precision.
// The per-precision instantiations live in layer_forward_impl_<precision>.cpp (one TU each, because
// the multiprecision ones take tens of seconds to compile); layer_forward.cpp parses the command line,
// reads the .npy files and dispatches with with_precision.
#include "core/layers/mixer_layer.hpp"
#include "core/rules/registry.hpp"

#include <vector>

namespace vla::cli {

struct LayerForwardResult {
  Mat<double> Y;                  // (T, d_model), y_t = W_o o_t + b_o, rounded to double from storage_t
  std::vector<StepStats> trace;   // (T) statistics after each step
};

// Runs MixerLayer<rule of cfg.mixer in P> with weights w (double, cast once to P's storage type)
// over X (T, d_model). Defined (and explicitly instantiated) in layer_forward_impl.hpp's users.
template <class P>
LayerForwardResult layer_forward_cpu(const MixerConfig& cfg, const LayerShape& shape, const MixerWeights<double>& w,
                                     const Mat<double>& X);

// The explicit instantiation each impl TU writes for its precision.
#define VLA_INSTANTIATE_LAYER_FORWARD(...)                                                                  \
  template LayerForwardResult layer_forward_cpu<__VA_ARGS__>(const MixerConfig&, const LayerShape&,          \
                                                            const MixerWeights<double>&, const Mat<double>&)

}  // namespace vla::cli
