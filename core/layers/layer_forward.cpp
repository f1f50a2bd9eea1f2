#include "core/layers/layer_forward.hpp"

namespace vla {

LayerForwardResult layer_forward(std::string_view precision, const MixerConfig& cfg, const LayerShape& shape,
                                 const MixerWeights<double>& w, const Mat<double>& X) {
  return with_precision(precision, [&](auto p) { return layer_forward<decltype(p)>(cfg, shape, w, X); });
}

}  // namespace vla
