#pragma once
// The inputs each head of a model's recurrent mixers sees on given token sequences: the model's own forward
// (core/model/transformer.hpp) in double, its MixerCache read after each block's mixer. A trained model's
// streams put the analyses that take a HeadStream (the chunked forms' conditioning and rounding,
// analysis/chunked_exactness.hpp) on the keys, queries and penalty directions training produced, instead of
// the random protocol's.
#include "analysis/head_stream.hpp"
#include "core/model/config.hpp"
#include "core/model/params.hpp"

#include <vector>

namespace vla::analysis {

struct ModelHeadStream {
  int sequence = 0, layer = 0, head = 0;
  HeadStream s;  // d = d_head, T = the sequence's length; q, k, v and u_raw (rules that read u) as the head reads
                 // them, before the feature map and the normalisations; gate: the head's gate logits, or one zero row
};

// Every (sequence, layer, head) of a recurrent mixer, sequence-major then layer then head. Throws
// std::invalid_argument naming --mixer for softmax (no recurrence), --next-latent for an aligned model, and
// the sequence when it is empty, longer than the positional table or holds a token outside the vocabulary.
std::vector<ModelHeadStream> model_head_streams(const model::ModelConfig& cfg, const model::Params<double>& p,
                                                const std::vector<std::vector<int>>& sequences);

}  // namespace vla::analysis
