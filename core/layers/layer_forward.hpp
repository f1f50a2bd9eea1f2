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

#include <fmt/format.h>

#include <limits>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace vla {

// X (T, d_model) in double must be representable in the storage type S before a layer runs on it
// (docs/recurrences.md, "Scale"): every value finite once rounded to S (1e300 is not a float), and no
// token lost to underflow (a token whose largest |x| is below S's smallest normal number would be kept
// with fewer digits than S has, or as 0). Otherwise std::invalid_argument naming the input, the token,
// the value and S's range: failing here is clearer than a non-finite state a few operations later.
template <class S> void check_input_range(const Mat<double>& X, std::string_view precision) {
  const double largest = to_double(std::numeric_limits<S>::max()), smallest = to_double(std::numeric_limits<S>::min());
  for (Eigen::Index t = 0; t < X.rows(); ++t) {
    const double m = X.row(t).cwiseAbs().maxCoeff();
    if (!is_finite(scalar_cast<S>(m)))
      throw std::invalid_argument(fmt::format("input: token {} holds {:g}, beyond the largest finite value of {} ({:g})", t + 1,
                                              m, precision, largest));
    if (m > 0.0 && m < smallest)
      throw std::invalid_argument(fmt::format("input: token {} is below the normal range of {} (its largest |x| is {:g}, the "
                                              "smallest normal number {:g}): it would lose its digits to underflow; scale the input",
                                              t + 1, precision, m, smallest));
  }
}

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
