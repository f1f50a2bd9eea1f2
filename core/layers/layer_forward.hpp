#pragma once
// One mixer layer over one sequence in any precision, from double weights and inputs: the CPU side of
// the `vla layer-forward` contract (docs/recurrences.md; vla::gpu::layer_forward is the fp32 GPU side)
// and the run behind the Fig. 4 protocol (analysis/random_protocol.hpp).
//
// layer_forward<P> is explicitly instantiated for every precision of the table (core/precisions.def)
// by translation units CMake generates (core/precision_instances.cmake); its definition is in
// layer_forward_impl.hpp, which only those include, so no other TU compiles the MPFR layers again.
#include "core/layers/mixer_layer.hpp"
#include "core/precision.hpp"
#include "core/rules/registry.hpp"

#include <string_view>
#include <vector>

namespace vla {

struct LayerForwardResult {
  Mat<double> Y;                  // (T, d_model), rounded to double from storage_t
  std::vector<StepStats> trace;   // (T * heads): statistics after each step, trace[t * heads + h]
};

// MixerLayer<rule cfg.mixer in P> with weights w (cast once to P's storage type) over X (T, d_model),
// a batch of one sequence.
template <class P>
LayerForwardResult layer_forward(const MixerConfig& cfg, const LayerShape& shape, const MixerWeights<double>& w,
                                 const Mat<double>& X);

// The same in the precision named `precision` (with_precision: an unknown name throws naming --precision).
LayerForwardResult layer_forward(std::string_view precision, const MixerConfig& cfg, const LayerShape& shape,
                                 const MixerWeights<double>& w, const Mat<double>& X);

}  // namespace vla
