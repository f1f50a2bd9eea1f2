// Next-latent alignment (MixerConfig::next_latent, core/model/next_latent.hpp; seed 003 sec. 2): the
// write at token t pairs the key of token t - 1 with v_t, and token 1 writes nothing.
#include "mixer_gradcheck.hpp"

#include "analysis/chunked_exactness.hpp"
#include "core/model/head.hpp"
#include "core/rules/falcon2/rule.hpp"
#include "core/rules/falcon2a/rule.hpp"
#include "core/rules/gla/rule.hpp"
#include "core/rules/gpu_support.hpp"
#include "core/rules/linear/rule.hpp"
#include "core/rules/mamba2/rule.hpp"
#include "core/rules/retnet/rule.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace vla;

namespace {
using P50 = Precision<mp50>;

// Head inputs as rows (T, d) from a test stream, with the gate rows rule R reads.
template <class R> HeadSequence<mp50> head_sequence(const analysis::HeadStream& s) {
  auto rows = [](const Mat<double>& m) { return cast_matrix<mp50>(Mat<double>(m.transpose())); };
  HeadSequence<mp50> x;
  x.q = rows(s.q);
  x.k = rows(s.k);
  x.v = rows(s.v);
  if constexpr (R::needs.gate) x.g = rows(Mat<double>(s.gate.topRows(R::needs.gate_rows(s.d))));
  return x;
}

// The paper's implementation of the alignment (seed 003 sec. 5): the write-key stream shifted down one
// token, a zero key first; the rule itself unchanged.
HeadSequence<mp50> literal_shift(HeadSequence<mp50> x) {
  const Eigen::Index n = x.k.rows();
  const Mat<mp50> k = x.k;
  x.k.bottomRows(n - 1) = k.topRows(n - 1);
  x.k.row(0).setZero();
  return x;
}

template <class R> double aligned_vs_literal(const R& rule, const analysis::HeadStream& s) {
  const HeadSequence<mp50> x = head_sequence<R>(s);
  Mat<mp50> O_aligned, O_literal;
  model::HeadTape<R> t1, t2;
  model::head_forward(rule, x, O_aligned, t1, true);
  model::head_forward(rule, literal_shift(x), O_literal, t2, false);
  return to_double(mp50((O_aligned - O_literal).norm() / O_literal.norm()));
}
}  // namespace

TEST_CASE("next-latent alignment is the paper's shifted write-key stream where a zero key writes nothing", "[train][next-latent]") {
  // For rules whose write feature of a zero key is zero (FALCON's RMSNorm(0) = 0; RetNet, Mamba-2 and
  // GLA write v k^T with the raw key) the paper's implementation, keys shifted with a zero key first, is
  // exactly the aligned run: same outputs in mp50. If this fails, the aligned run pairs the wrong tokens
  // (k_t with v_t, or q, v, gate taken from the previous token), or token 1's output is not the read
  // of the initial state.
  const analysis::HeadStream s = analysis::chunk_test_stream(5, 17, 3);
  const double e[] = {aligned_vs_literal(Falcon2Rule<P50>(), s), aligned_vs_literal(Falcon2aRule<P50>(), s),
                      aligned_vs_literal(RetNetRule<P50>(), s), aligned_vs_literal(Mamba2Rule<P50>(), s),
                      aligned_vs_literal(GlaRule<P50>(), s)};
  INFO("relative differences falcon2 " << e[0] << ", falcon2a " << e[1] << ", retnet " << e[2] << ", mamba2 " << e[3] << ", gla " << e[4]);
  for (const double x : e) CHECK(x <= 1e-45);
}

TEST_CASE("next-latent alignment writes nothing at token 1 even where a zero key has a nonzero feature", "[train][next-latent]") {
  // Linear attention's feature map sends a zero key to phi(0) = 1, so the literal shift would write
  // v_1 1^T at token 1; the alignment's zero *write feature* (seed 003 sec. 5: "the first write is a
  // no-op") does not. Token 1's output is 0 and the aligned run differs from the literal shift. If the
  // two agreed here, the alignment would be feeding a zero raw key through the rule instead of skipping
  // the write.
  const analysis::HeadStream s = analysis::chunk_test_stream(4, 9, 5);
  const HeadSequence<mp50> x = head_sequence<LinearAttentionRule<P50>>(s);
  Mat<mp50> O;
  model::HeadTape<LinearAttentionRule<P50>> tape;
  model::head_forward(LinearAttentionRule<P50>(), x, O, tape, true);
  CHECK(to_double(mp50(O.row(0).norm())) == 0.0);
  CHECK(aligned_vs_literal(LinearAttentionRule<P50>(), s) > 1e-3);
}

TEST_CASE("next-latent alignment: the mixer's gradients by central differences, double and mp50", "[train][next-latent]") {
  // The reverse pass of the aligned run maps the gradients back to the tokens they belong to: dk of
  // token t comes from the write at t + 1, dq, dv and the gate's from the step at t; token 1's q, v, gate
  // and the last token's key get none (FALCON-3's window reads several earlier keys: they shift with it). A
  // wrong map fails the check of X and of W_q, W_k, W_v, W_g.
  for (const std::string name : {"linear", "vla", "deltanet", "falcon2", "falcon3", "gla", "softmax"}) {
    MixerConfig mc;
    mc.mixer = name;
    mc.next_latent = true;
    test::check_mixer_gradients(mc);
  }
}

TEST_CASE("next-latent alignment: the CUDA path refuses it, naming --next-latent", "[train][next-latent]") {
  // The kernels write the same-step pair; running them on an aligned config would train another model.
  MixerConfig mc;
  mc.mixer = "vla";
  mc.next_latent = true;
  const auto why = gpu_unsupported(mc, 32, GpuUse::Training);
  REQUIRE(why.has_value());
  CHECK(why->find("--next-latent") != std::string::npos);
  mc.next_latent = false;
  CHECK_FALSE(gpu_unsupported(mc, 32, GpuUse::Training).has_value());
}
