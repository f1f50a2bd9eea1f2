// analysis/model_head_streams.hpp hands the chunked forms' analyses the inputs a model's heads see. If it
// picked the wrong layer, head or columns, transposed a stream, or read the projections before the residual
// stream had passed the earlier blocks, those analyses would measure inputs no head ever sees: the test
// rebuilds layer 0 from the parameters, runs the rule over each of its streams, and carries the block
// forward by hand to layer 1, whose streams must then be what the model handed out.
#include "analysis/chunked_exactness.hpp"
#include "analysis/model_head_streams.hpp"
#include "core/model/gelu.hpp"
#include "core/model/layernorm.hpp"
#include "core/model/linear.hpp"
#include "core/rules/vla/rule.hpp"

#include <catch2/catch.hpp>

#include <random>

using namespace vla;
using namespace vla::analysis;
using namespace vla::model;

namespace {
ModelConfig small_model() {
  ModelConfig c;
  c.d_model = 16;
  c.heads = 2;
  c.d_head = 8;
  c.ffn = 24;
  c.layers = 2;
  c.max_len = 32;
  c.mixer.mixer = "vla";
  return c;
}
// init_params with every tensor moved off its initial value (biases 0, gains 1 would hide a missing term).
Params<double> perturbed_params(const ModelConfig& c) {
  Params<double> p = init_params<double>(c, 5);
  std::mt19937_64 g(6);
  std::normal_distribution<double> n(0.0, 0.1);
  for (auto& m : p.t) m = m.unaryExpr([&](double x) { return x + n(g); });
  return p;
}
Mat<double> head_cols(const Mat<double>& M, int h, int dh) { return M.middleCols(h * dh, dh); }
}  // namespace

TEST_CASE("model head streams: each (sequence, layer, head) is what that head of the model's forward reads", "[analysis]") {
  const ModelConfig c = small_model();
  const Params<double> p = perturbed_params(c);
  const std::vector<std::vector<int>> seqs{{3, 70, 9, 81, 127, 3, 9}, {1, 2, 64, 65, 127, 2, 1, 5, 6, 7, 8}};
  const auto streams = model_head_streams(c, p, seqs);
  REQUIRE(streams.size() == seqs.size() * c.layers * c.heads);
  const VlaRule<Precision<double>> rule(VlaRule<Precision<double>>::from_config(c.mixer).options());
  const int dh = c.d_head, H = c.heads;
  for (std::size_t b = 0; b < seqs.size(); ++b) {
    const int T = static_cast<int>(seqs[b].size());
    auto at = [&](int l, int h) -> const ModelHeadStream& { return streams[(b * c.layers + l) * H + h]; };
    // Layer 0 from the embeddings: X = E[tok] + P, H1 = LN1(X), Q, K, V = H1 W^T + b, U^h = K^h W_u^h^T + b_u^h.
    Mat<double> X(T, c.d_model);
    for (int t = 0; t < T; ++t) X.row(t) = p.t[TOK].row(seqs[b][t]) + p.t[POS].row(t);
    for (int l = 0; l < c.layers; ++l) {
      LayerNormCache<double> ln;
      const Mat<double> H1 = layernorm_forward(X, p.at(l, LN1_G), p.at(l, LN1_B), ln);
      const Mat<double> Q = linear_forward(H1, p.at(l, WQ), p.at(l, BQ)), K = linear_forward(H1, p.at(l, WK), p.at(l, BK)),
                        V = linear_forward(H1, p.at(l, WV), p.at(l, BV));
      Mat<double> O(T, H * dh);
      for (int h = 0; h < H; ++h) {
        const ModelHeadStream& m = at(l, h);
        CHECK(m.sequence == static_cast<int>(b));
        CHECK(m.layer == l);
        CHECK(m.head == h);
        REQUIRE(m.s.T == T);
        REQUIRE(m.s.d == dh);
        const Mat<double> U = linear_forward(head_cols(K, h, dh), Mat<double>(p.at(l, WU).middleRows(h * dh, dh)),
                                             Mat<double>(p.at(l, BU).middleRows(h * dh, dh)));
        // The same operations in the same order as the model's forward: equal to a few rounding errors (the
        // residual stream of layer 1 went through this test's own sums), far below an O(1) mistake.
        const double tol = 1e-12;
        CHECK((m.s.q.transpose() - head_cols(Q, h, dh)).norm() <= tol * Q.norm());
        CHECK((m.s.k.transpose() - head_cols(K, h, dh)).norm() <= tol * K.norm());
        CHECK((m.s.v.transpose() - head_cols(V, h, dh)).norm() <= tol * V.norm());
        CHECK((m.s.u.transpose() - U).norm() <= tol * U.norm());
        O.middleCols(h * dh, dh) = rule_outputs<double>(rule, m.s);  // the head run over the stream alone
      }
      // The rest of block l by hand: the mixer's output projection and the FFN, each added to the stream.
      X += linear_forward(O, p.at(l, WO), p.at(l, BO));
      LayerNormCache<double> ln2;
      const Mat<double> H2 = layernorm_forward(X, p.at(l, LN2_G), p.at(l, LN2_B), ln2);
      X += linear_forward(gelu_forward(linear_forward(H2, p.at(l, W1), p.at(l, B1))), p.at(l, W2), p.at(l, B2));
    }
  }
  // Layer 1 is not layer 0 again (the check above would then pass only by coincidence of the inputs).
  CHECK((streams[2].s.q - streams[0].s.q).norm() > 1e-3 * streams[0].s.q.norm());
}

TEST_CASE("model head streams: refusals name what is wrong", "[analysis]") {
  ModelConfig c = small_model();
  const Params<double> p = perturbed_params(c);
  CHECK_THROWS_WITH(model_head_streams(c, p, {std::vector<int>(33, 1)}), Catch::Contains("--max-len"));
  CHECK_THROWS_WITH(model_head_streams(c, p, {{1, 128}}), Catch::Contains("outside the vocabulary"));
  CHECK_THROWS_WITH(model_head_streams(c, p, {{}}), Catch::Contains("sequence 0"));
  c.mixer.next_latent = true;
  CHECK_THROWS_WITH(model_head_streams(c, p, {{1, 2}}), Catch::Contains("--next-latent"));
  c.mixer.next_latent = false;
  c.mixer.mixer = "softmax";
  CHECK_THROWS_WITH(model_head_streams(c, init_params<double>(c, 5), {{1, 2}}), Catch::Contains("--mixer: softmax"));
}
