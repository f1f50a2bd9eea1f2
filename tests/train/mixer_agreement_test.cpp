// The model's mixer forward (core/model/mixer.hpp) must be the toolkit's mixer (core/layers/
// mixer_layer.hpp + core/rules): same weights, same input -> same output up to rounding. A failure
// means the trained model is not the mixer the rest of the toolkit studies.
#include "core/layers/mixer_layer.hpp"
#include "core/model/gradcheck.hpp"

#include <catch2/catch.hpp>

using namespace vla;

TEST_CASE("model mixer forward equals MixerLayer (double)", "[train]") {
  // Also with next-latent alignment: the layer shifts keys token by token, the model whole sequences
  // (core/model/next_latent.hpp); a failure there means the two pair different tokens.
  for (const bool next_latent : {false, true})
  for (const std::string name : {"vla", "vla-rls", "deltanet", "linear", "softmax", "retnet"}) {
    MixerConfig mc;
    mc.mixer = name;
    mc.next_latent = next_latent;
    model::ModelConfig cfg;
    cfg.vocab = 16; cfg.d_model = 12; cfg.heads = 3; cfg.d_head = 4; cfg.ffn = 8; cfg.layers = 1; cfg.max_len = 9; cfg.mixer = mc;
    auto p = model::check_params_for_agreement(cfg);
    with_rule<Precision<double>>(mc, [&](const auto& rule) {
      using Rule = std::decay_t<decltype(rule)>;
      MixerLayer<Rule> layer(LayerShape{cfg.d_model, cfg.d_head, cfg.heads, 1}, rule, model::block_mixer_weights(p, 0), next_latent);
      std::mt19937_64 gen(3);
      std::normal_distribution<double> nd(0.0, 1.0);
      Mat<double> X(9, cfg.d_model);
      for (Eigen::Index i = 0; i < X.size(); ++i) X(i) = nd(gen);
      const auto Y_ref = layer.forward({X});
      model::MixerCache<Rule> cache;
      const Mat<double> Y = model::mixer_forward<double>(rule, p, 0, cfg.heads, cfg.d_head, X, cache, next_latent);
      // Both compute the same formulas in double; they differ only in the summation order of the
      // projections (GEMM blocking), so the difference is a few ulps of the outputs, amplified through
      // T = 9 recurrence steps: 1e3 u relative to max|Y| is generous for that and far below any formula error.
      const double tol = 1e3 * unit_roundoff<double>() * Y_ref[0].cwiseAbs().maxCoeff();
      INFO(name << (next_latent ? " (next-latent)" : "") << " max diff " << (Y - Y_ref[0]).cwiseAbs().maxCoeff() << " tol " << tol);
      CHECK((Y - Y_ref[0]).cwiseAbs().maxCoeff() <= tol);
    });
  }
}
