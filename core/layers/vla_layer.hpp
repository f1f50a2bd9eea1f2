#pragma once
// VLALayer (spec 001): VLALayer(d_model, d_head, rank, lambda_init, eps) with internal W_q, W_k, W_v,
// W_u projections and the W_o output projection, over the VLA rule of core/rules/vla/.
//
// 001 makes single-head VLA the contract: d_head must equal d_model (so the d x d penalty matches
// v_t), and the constructor rejects anything else. The paper trains H = 4 heads of d_head = 32 in a
// d = 128 model; VLALayer::multi_head builds that. Defaults follow the paper (lambda0 = 0.1,
// eps = 1e-4), not 001's example values (1e-3, 1e-6); docs/recurrences.md says why.
#include "core/layers/mixer_layer.hpp"
#include "core/rules/vla/rule.hpp"

namespace vla {

template <class P = Precision<float>> class VLALayer : public MixerLayer<VlaRule<P>> {
  using Base = MixerLayer<VlaRule<P>>;

 public:
  using storage_t = typename P::storage_t;

  // Single head, the 001 signature. Weights are drawn from `seed` (random_weights).
  VLALayer(int d_model, int d_head, int rank = 1, double lambda_init = 0.1, double eps = 1e-4, std::uint64_t seed = 0)
      : Base(single_head_shape(d_model, d_head, rank), VlaRule<P>(options(rank, lambda_init, eps)),
             random_weights<storage_t>(single_head_shape(d_model, d_head, rank), VlaRule<P>::needs, seed)) {}

  // Any shape and options with given weights.
  VLALayer(LayerShape shape, VlaOptions opt, MixerWeights<storage_t> w)
      : Base(checked(shape, opt), VlaRule<P>(opt), std::move(w)) {}

  // H heads of d_model / H (the paper's d = 128, H = 4, d_h = 32).
  static VLALayer multi_head(int d_model, int heads, int rank = 1, double lambda_init = 0.1, double eps = 1e-4,
                             std::uint64_t seed = 0) {
    if (heads < 1 || d_model % heads != 0)
      throw std::invalid_argument(fmt::format("heads: must divide d_model = {}, got {}", d_model, heads));
    LayerShape s{d_model, d_model / heads, heads, rank};
    return VLALayer(s, options(rank, lambda_init, eps), random_weights<storage_t>(s, VlaRule<P>::needs, seed));
  }

 private:
  static LayerShape single_head_shape(int d_model, int d_head, int rank) {
    if (d_head != d_model)
      throw std::invalid_argument(fmt::format(
          "d_head: single-head VLA requires d_head == d_model (got d_head = {}, d_model = {}); "
          "use VLALayer::multi_head for H heads of d_model / H",
          d_head, d_model));
    return LayerShape{d_model, d_head, 1, rank};
  }
  static VlaOptions options(int rank, double lambda_init, double eps) {
    VlaOptions o;
    o.penalty.rank = rank;
    o.penalty.lambda0 = lambda_init;
    o.penalty.eps = eps;
    return o;
  }
  static LayerShape checked(LayerShape s, const VlaOptions& o) {
    if (s.rank != o.penalty.rank)
      throw std::invalid_argument(fmt::format("rank: layer shape says {}, options say {}", s.rank, o.penalty.rank));
    return s;
  }
};

}  // namespace vla
