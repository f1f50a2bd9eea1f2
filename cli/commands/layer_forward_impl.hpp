#pragma once
// Definition of layer_forward_cpu, included only by the layer_forward_impl_<precision>.cpp files.
#include "cli/commands/layer_forward.hpp"

namespace vla::cli {

template <class P>
LayerForwardResult layer_forward_cpu(const MixerConfig& cfg, const LayerShape& shape, const MixerWeights<double>& w,
                                     const Mat<double>& X) {
  using S = typename P::storage_t;
  return with_rule<P>(cfg, [&](auto rule) {
    using Rule = decltype(rule);
    const MixerLayer<Rule> layer(shape, std::move(rule), w.template cast<S>());
    LayerTrace tr;
    const std::vector<Mat<S>> Y = layer.forward({cast_matrix<S>(X)}, &tr);  // batch of one: (1, T, d_model)
    return LayerForwardResult{cast_matrix<double>(Y[0]), tr.stats};      // B = H = 1: stats[t]
  });
}

}  // namespace vla::cli
