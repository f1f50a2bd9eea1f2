#include "analysis/model_head_streams.hpp"

#include "core/model/transformer.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <type_traits>

namespace vla::analysis {

std::vector<ModelHeadStream> model_head_streams(const model::ModelConfig& cfg, const model::Params<double>& p,
                                                const std::vector<std::vector<int>>& sequences) {
  const bool recurrent = with_rule<Precision<double>>(cfg.mixer, [](const auto& r) { return std::decay_t<decltype(r)>::recurrent; });
  if (!recurrent) throw std::invalid_argument(fmt::format("--mixer: {} has no recurrence, so no head streams", cfg.mixer.mixer));
  // Aligned heads (core/model/next_latent.hpp) read each token's inputs shifted against the projections'.
  if (cfg.mixer.next_latent) throw std::invalid_argument("--next-latent: a model trained aligned has no head streams here (its heads read shifted inputs)");
  std::vector<ModelHeadStream> out;
  for (std::size_t b = 0; b < sequences.size(); ++b) {
    const auto& tokens = sequences[b];
    if (tokens.empty() || static_cast<int>(tokens.size()) > cfg.max_len)
      throw std::invalid_argument(fmt::format("sequence {}: {} tokens; the model takes 1 to {} (--max-len)", b, tokens.size(), cfg.max_len));
    for (int t : tokens)
      if (t < 0 || t >= cfg.vocab) throw std::invalid_argument(fmt::format("sequence {}: token {} outside the vocabulary 0..{}", b, t, cfg.vocab - 1));
    const int T = static_cast<int>(tokens.size()), dh = cfg.d_head;
    const std::vector<int> no_targets(tokens.size(), -1);
    model::sequence_forward_backward<double>(cfg, p, tokens, no_targets, 1.0, nullptr, nullptr, [&](int l, const auto& cache) {
      for (int h = 0; h < cfg.heads; ++h) {
        const auto x = model::head_inputs(cache, h, dh);  // (T, d_h) each: transposed into the stream's columns
        ModelHeadStream m{static_cast<int>(b), l, h, {}};
        m.s.d = dh;
        m.s.T = T;
        m.s.q = x.q.transpose();
        m.s.k = x.k.transpose();
        m.s.v = x.v.transpose();
        m.s.u = x.u.size() ? Mat<double>(x.u.transpose()) : Mat<double>::Zero(dh, T);
        m.s.gate = x.g.size() ? Mat<double>(x.g.transpose()) : Mat<double>::Zero(1, T);
        m.s.validate();
        out.push_back(std::move(m));
      }
    });
  }
  return out;
}

}  // namespace vla::analysis
