#pragma once
// The small causal language model of the paper's Tables 3 and 6 (VLATransformer in 001): shape and
// mixer. Defaults are the paper's: L = 2 Pre-LN blocks, d = 128, H = 4 heads of d_h = 32, FFN 256,
// vocabulary 128.
#include "core/rules/registry.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace vla::model {

struct ModelConfig {
  int vocab = 128;
  int d_model = 128;
  int heads = 4;
  int d_head = 32;
  int ffn = 256;
  int layers = 2;
  int max_len = 256;  // rows of the learnable positional embedding
  MixerConfig mixer;

  void validate() const {
    auto pos = [](const char* n, int v) {
      if (v < 1) throw std::invalid_argument(fmt::format("{}: must be >= 1, got {}", n, v));
    };
    pos("--vocab", vocab); pos("--d-model", d_model); pos("--heads", heads); pos("--d-head", d_head);
    pos("--ffn", ffn); pos("--layers", layers); pos("--max-len", max_len);
    // The training backward covers rank-1 penalties and no S renormalisation (the paper's setting).
    if (mixer.penalty.rank != 1)
      throw std::invalid_argument(fmt::format("--rank: the training backward supports rank 1 only, got {}", mixer.penalty.rank));
    if (mixer.renormalise_S)
      throw std::invalid_argument("--renormalise: S renormalisation has no backward; training runs without it");
    // Throws naming the allowed mixers.
    with_rule<Precision<double>>(mixer, [](auto&&) { return 0; });
  }
};

}  // namespace vla::model
