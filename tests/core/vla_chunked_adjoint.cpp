// The group-parallel backward of one VLA head (core/rules/vla/chunked_adjoint.hpp, docs/chunkwise-vla.md
// "The backward across groups") and the chunkwise backward (core/rules/vla/chunkwise_adjoint.hpp, "The
// backward in the chunk form") against the sequential reverse pass they must reproduce (core/model/head.hpp
// head_backward, core/rules/vla/adjoint.hpp): equal in mp50 for every group or chunk length, refresh period
// (and, for the group form, guard policy); in float each is measured against mp50.
#include "analysis/chunked_exactness.hpp"
#include "analysis/head_stream.hpp"
#include "core/model/head.hpp"
#include "core/rules/vla/chunked_adjoint.hpp"
#include "core/rules/vla/chunkwise_adjoint.hpp"
#include "core/rules/vla/rule.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

using namespace vla;
using namespace vla::analysis;

namespace {

template <class T> HeadSequence<T> head_sequence(const HeadStream& s) {
  auto rows = [](const Mat<double>& m) { return cast_matrix<T>(Mat<double>(m.transpose())); };
  HeadSequence<T> x;
  x.q = rows(s.q);
  x.k = rows(s.k);
  x.v = rows(s.v);
  x.u = rows(s.u);
  return x;
}

// dL/do_t, (T, d) rows N(0, 1) from seed.
Mat<double> random_dO(int T, int d, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> n(0.0, 1.0);
  Mat<double> dO(T, d);
  for (auto& e : dO.reshaped()) e = n(gen);
  return dO;
}

// One head's forward in precision T and its sequential backward: what the group form is held to.
template <class T> struct Sequential {
  VlaRule<Precision<T>> rule;
  HeadSequence<T> x;
  Mat<T> dO;
  model::HeadTape<VlaRule<Precision<T>>> tape;
  HeadGrads<T> grad{0, 0};
};

template <class T> Sequential<T> sequential(const VlaOptions& opt, const HeadStream& s, const Mat<double>& dO) {
  Sequential<T> r{VlaRule<Precision<T>>(opt), head_sequence<T>(s), cast_matrix<T>(dO), {}, HeadGrads<T>(0, 0)};
  Mat<T> O;
  model::head_forward(r.rule, r.x, O, r.tape);
  r.grad = model::head_backward(r.rule, r.x, r.tape, r.dO);
  return r;
}

template <class T> HeadGrads<T> grouped(const Sequential<T>& s, int group_tokens, GroupBackwardStats* stats = nullptr) {
  return group_parallel_head_backward(s.rule, s.x, s.tape, s.dO, group_tokens, stats);
}

// ||got - ref||_F / ||ref||_F of one gradient, in mp50.
template <class T> double rel(const Mat<T>& got, const Mat<mp50>& ref) {
  return to_double(mp50((cast_matrix<mp50>(got) - ref).norm() / ref.norm()));
}

template <class T> HeadGrads<mp50> cast_grads(const HeadGrads<T>& g) {
  HeadGrads<mp50> r(0, 0);
  r.dq = cast_matrix<mp50>(g.dq);
  r.dk = cast_matrix<mp50>(g.dk);
  r.dv = cast_matrix<mp50>(g.dv);
  r.du = cast_matrix<mp50>(g.du);
  return r;
}

// The worst of the four gradients' relative differences.
template <class T> double worst_rel(const HeadGrads<T>& got, const HeadGrads<mp50>& ref) {
  return std::max({rel(got.dq, ref.dq), rel(got.dk, ref.dk), rel(got.dv, ref.dv), rel(got.du, ref.du)});
}

// backward(seq, length) against seq's sequential gradients in mp50, each of the four within 1e-40 relative
// (mp50 carries ~166 bits: two orders of the products differ by a few thousand roundings of ~1e-50), over
// T = 37 (prime) and 150 (no multiple of 8 or 20: a short last group or chunk), refresh periods 20 and 7
// (refreshes inside and on the edges of groups and chunks) and 0, the key normalised or not (the
// normalisation is outside the chains: T = 37 only), lengths 1 (a step per group or chunk), 3, 8, 20, T and
// T + 5 (one).
template <class Backward> void mp50_equal_sweep(const std::string& what, Backward&& backward) {
  const int d = 6;
  double worst = 0;
  int runs = 0;
  for (int T : {37, 150}) {
    const HeadStream s = chunk_test_stream(d, T, 5 + T);
    const Mat<double> dO = random_dO(T, d, 11 + T);
    for (int period : {20, 7, 0})
      for (bool normalise_key : {true, false}) {
        if (!normalise_key && T != 37) continue;
        VlaOptions opt;
        opt.normalise_key = normalise_key;
        opt.penalty.refresh_period = period;
        opt.penalty.refresh_eta = 0.05;  // large enough that a refresh put in the wrong place shows
        const auto seq = sequential<mp50>(opt, s, dO);
        for (int length : {1, 3, 8, 20, T, T + 5}) {
          INFO(what << ": T " << T << ", refresh period " << period << ", normalise_key " << normalise_key << ", length " << length);
          const auto g = backward(seq, length);
          CHECK(rel(g.dq, seq.grad.dq) <= 1e-40);
          CHECK(rel(g.dk, seq.grad.dk) <= 1e-40);
          CHECK(rel(g.dv, seq.grad.dv) <= 1e-40);
          CHECK(rel(g.du, seq.grad.du) <= 1e-40);
          worst = std::max(worst, worst_rel(g, seq.grad));
          ++runs;
        }
      }
  }
  WARN(what << " vs sequential backward, mp50, " << runs << " runs: max relative difference " << worst);
}

}  // namespace

TEST_CASE("group-parallel VLA backward equals the sequential backward in mp50, every group length and refresh period",
          "[chunked][vla][adjoint]") {
  // If this fails, the group form is not the sequential reverse pass: R_g multiplies in the wrong token
  // order (C1), the congruence Phi_g^T Sigma Phi_g is not the Sherman-Morrison step's adjoint on the
  // symmetric part of dA (C2), dA^0 was walked from a dS other than the true one (B2), or a group is walked
  // from the wrong carry (B3).
  mp50_equal_sweep("group-parallel", [](const Sequential<mp50>& seq, int group) {
    GroupBackwardStats stats;
    auto g = grouped(seq, group, &stats);
    CHECK(stats.groups == (seq.x.q.rows() + group - 1) / group);
    CHECK(stats.clamped_tokens == 0);  // delta >= 1 > eps: the congruence path throughout
    return g;
  });
}

TEST_CASE("group-parallel VLA backward equals the sequential backward in mp50 where the delta guard fires, both policies",
          "[chunked][vla][adjoint]") {
  // delta_t = 1 + u^T A_{t-1} u lies in [1, 1 + ||A||_2 / d] with ||A||_2 <= 1 / lambda0 = 10 early on, so
  // eps = 2 at d = 6 makes the guard fire on the first tokens and not on the later ones. If this fails, a
  // clamped token's map of the symmetric cotangent (no d delta term, divided by eps) was folded into a
  // congruence, or a skipped token's F_t is not the identity.
  const int d = 6, T = 37;
  const HeadStream s = chunk_test_stream(d, T, 8);
  const Mat<double> dO = random_dO(T, d, 19);
  double worst = 0;
  for (auto policy : {DeltaPolicy::Clamp, DeltaPolicy::SkipAddEps}) {
    VlaOptions opt;
    opt.penalty.eps = 2.0;
    opt.penalty.policy = policy;
    const bool clamp = policy == DeltaPolicy::Clamp;
    const auto seq = sequential<mp50>(opt, s, dO);
    for (int group : {1, 3, 8, T}) {
      GroupBackwardStats stats;
      const auto g = grouped(seq, group, &stats);
      const int fired = clamp ? stats.clamped_tokens : stats.skipped_tokens;
      INFO((clamp ? "clamp" : "skip") << ", group " << group << ": the guard fired on " << fired << " of " << T
                                      << " tokens; " << stats.clamped_groups << " groups chained token by token");
      CHECK(fired > 0);
      CHECK(fired < T);
      CHECK((clamp ? stats.skipped_tokens : stats.clamped_tokens) == 0);
      if (clamp && group <= 3) CHECK(stats.clamped_groups > 0);  // the token-by-token chain step was exercised
      CHECK(worst_rel(g, seq.grad) <= 1e-40);
      worst = std::max(worst, worst_rel(g, seq.grad));
      if (group == 1) WARN((clamp ? "clamp" : "skip") << " (eps = 2): the guard fired on " << fired << " of " << T << " tokens");
    }
  }
  WARN("group-parallel vs sequential backward, mp50, guard firing: max relative difference " << worst);
}

TEST_CASE("group-parallel and chunkwise VLA backwards in float round like the sequential float backward on the random protocol",
          "[chunked][vla][adjoint]") {
  // The random protocol (d = 16, T = 1000, the paper's lambda0, eps, refresh every 20 tokens), dO ~ N(0, 1);
  // each float backward reads its own float forward's tape, and both are measured against the mp50 sequential
  // backward. The group form adds two chains of d x d products per group (dS_b R_g, Phi_g^T Sigma_b Phi_g)
  // to the sequential pass's rounding. If this fails, those products lose accuracy that the sequential
  // pass keeps (R_g or Phi_g grow over 320 or 640 tokens), and a float GPU backward of this form would need
  // shorter groups or a chain in higher precision.
  const int d = 16, T = 1000;
  const HeadStream s = random_head_stream(d, T, 42);
  const Mat<double> dO = random_dO(T, d, 7);
  const VlaOptions opt;
  const auto ref = sequential<mp50>(opt, s, dO);
  const auto f = sequential<float>(opt, s, dO);
  const double e_seq = worst_rel(f.grad, ref.grad);
  auto each = [&](const HeadGrads<float>& g) {
    return fmt::format("dq {:.3g}, dk {:.3g}, dv {:.3g}, du {:.3g}", rel(g.dq, ref.grad.dq), rel(g.dk, ref.grad.dk),
                       rel(g.dv, ref.grad.dv), rel(g.du, ref.grad.du));
  };
  WARN("float vs mp50, sequential: " << each(f.grad));
  for (int group : {320, 640}) {
    const auto g = grouped(f, group);
    const double e_group = worst_rel(g, ref.grad);
    WARN("float vs mp50, group-parallel (" << group << " tokens): " << each(g) << "; worst " << e_group << " vs sequential " << e_seq
         << "; the two float backwards differ by " << worst_rel(g, cast_grads(f.grad)));
    CHECK(e_group <= 2 * e_seq);
  }
  // The chunk form reads no per-token state: each chunk rebuilds its A_t, S_t from the chunk's start, solves
  // two triangular systems and differentiates a Cholesky factorisation. If these fail, that rounds far worse
  // than the token walk (a float GPU backward of this form would need its factorisation in higher
  // precision); the bound is 4x the sequential float backward's error.
  for (int chunk : {10, 20}) {
    const auto g = chunkwise_head_backward(f.rule, f.x, f.dO, chunk);
    WARN("float vs mp50, chunkwise (chunks of " << chunk << "): " << each(g) << "; worst " << worst_rel(g, ref.grad));
    CHECK(worst_rel(g, ref.grad) <= 4 * e_seq);
  }
  const auto gc = group_parallel_head_backward(f.rule, f.x, f.tape, f.dO, 320, nullptr, 20);  // the GPU's structure
  WARN("float vs mp50, groups of 320 tokens walked in chunks of 20: " << each(gc) << "; worst " << worst_rel(gc, ref.grad));
  CHECK(worst_rel(gc, ref.grad) <= 4 * e_seq);
}

TEST_CASE("group-parallel VLA backward refuses what it does not cover, naming the option", "[chunked][vla][adjoint]") {
  const HeadStream s = chunk_test_stream(3, 5, 1);
  const Mat<double> dO = random_dO(5, 3, 2);
  const auto ok = sequential<double>(VlaOptions{}, s, dO);
  CHECK_THROWS_WITH(grouped(ok, 0), Catch::Contains("group_tokens") && Catch::Contains(">= 1"));
  auto refused = [&](const VlaOptions& opt, const std::string& name) {
    CHECK_THROWS_WITH(group_parallel_head_backward(VlaRule<Precision<double>>(opt), ok.x, ok.tape, ok.dO, 2), Catch::Contains(name));
  };
  refused(VlaOptions::preset("vla-rls"), "gain");
  refused(VlaOptions::preset("vla-v2"), "gain");
  refused(VlaOptions::preset("vla-fixed-a"), "fixed_A");
  VlaOptions key;
  key.penalty_source = PenaltySource::Key;
  refused(key, "penalty_source");
  VlaOptions r2;
  r2.penalty.rank = 2;
  refused(r2, "rank");
  VlaOptions renorm;
  renorm.memory.renormalise = true;
  renorm.memory.renorm_threshold = 1.0;
  refused(renorm, "renormalise_S");
}

TEST_CASE("chunkwise VLA backward equals the sequential backward in mp50, every chunk length and refresh period",
          "[chunked][vla][adjoint]") {
  // If this fails, the matrix form's reverse pass is not the sequential one: the read's denominators, the
  // residual solve's transpose (A3), line 20's normalisation, the masks of tril(K Y^T) D^-1 (A4), the
  // symmetric part of dA reaching Y (A5), or the adjoint of the L D L^T (A6) is wrong; a chunk of 1 token
  // is the step itself.
  mp50_equal_sweep("chunkwise", [](const Sequential<mp50>& seq, int chunk) { return chunkwise_head_backward(seq.rule, seq.x, seq.dO, chunk); });
}

TEST_CASE("group-parallel VLA backward with chunk walks equals the sequential backward in mp50", "[chunked][vla][adjoint]") {
  // Each group walked chunk by chunk by the chunk form's adjoint, started from the tape's state before each
  // chunk: the group passes (B1)-(B3), (C1)-(C2) with matrix-product walks, the structure of a tensor-core
  // backward. If this fails, a chunk walk from a set carry is not the token walk from it (a carry's dA read
  // unsymmetrised, or dz not passed through), or the chunks are cut differently from the refresh.
  const int d = 6, T = 150;
  const HeadStream s = chunk_test_stream(d, T, 23);
  const Mat<double> dO = random_dO(T, d, 29);
  double worst = 0;
  int runs = 0;
  for (int period : {20, 7, 0}) {
    VlaOptions opt;
    opt.penalty.refresh_period = period;
    opt.penalty.refresh_eta = 0.05;
    const auto seq = sequential<mp50>(opt, s, dO);
    for (int group : {8, 40, T})
      for (int chunk : {3, 8, 20}) {
        const auto g = group_parallel_head_backward(seq.rule, seq.x, seq.tape, seq.dO, group, nullptr, chunk);
        INFO("refresh period " << period << ", group " << group << ", chunk " << chunk);
        CHECK(worst_rel(g, seq.grad) <= 1e-40);
        worst = std::max(worst, worst_rel(g, seq.grad));
        ++runs;
      }
  }
  WARN("group-parallel backward with chunk walks vs sequential, mp50, " << runs << " runs: max relative difference " << worst);
}

TEST_CASE("chunkwise VLA backward refuses what it does not cover, naming the option", "[chunked][vla][adjoint]") {
  const HeadStream s = chunk_test_stream(3, 5, 1);
  const Mat<double> dO = random_dO(5, 3, 2);
  const auto ok = sequential<double>(VlaOptions{}, s, dO);
  CHECK_THROWS_WITH(chunkwise_head_backward(ok.rule, ok.x, ok.dO, 0), Catch::Contains("chunk") && Catch::Contains(">= 1"));
  auto refused = [&](const VlaOptions& opt, const std::string& name) {
    CHECK_THROWS_WITH(chunkwise_head_backward(VlaRule<Precision<double>>(opt), ok.x, ok.dO, 2), Catch::Contains(name));
  };
  refused(VlaOptions::preset("vla-rls"), "gain");
  refused(VlaOptions::preset("vla-fixed-a"), "fixed_A");
  VlaOptions big_eps;
  big_eps.penalty.eps = 2.0;
  refused(big_eps, "eps");
  CHECK_THROWS_WITH(group_parallel_head_backward(VlaRule<Precision<double>>(big_eps), ok.x, ok.tape, ok.dO, 2, nullptr, 2), Catch::Contains("eps"));
  CHECK_THROWS_WITH(group_parallel_head_backward(ok.rule, ok.x, ok.tape, ok.dO, 2, nullptr, -1), Catch::Contains("chunk"));
  // A chunk started from an A that is not positive definite has no L D L^T: said, naming its tokens, where
  // a Cholesky failure read on would differentiate garbage into the gradients.
  const VlaOptions opt;
  const VlaFeatures<double> f = vla_features<double>(ok.x.q, ok.x.k, ok.x.u, opt);
  HeadGrads<double> g(5, 3);
  const VlaChunkCarry<double> zero{Mat<double>::Zero(3, 3), Vec<double>::Zero(3), Mat<double>::Zero(3, 3)};
  CHECK_THROWS_WITH(vla_chunk_adjoint(chunk_adjoint_inputs(f, ok.x, ok.dO, opt), 1, 3, Mat<double>(-10.0 * Mat<double>::Identity(3, 3)),
                                      Mat<double>(Mat<double>::Zero(3, 3)), Vec<double>(Vec<double>::Zero(3)), zero, g),
                    Catch::Contains("tokens 1..3") && Catch::Contains("positive definite"));
}

TEST_CASE("chunk adjoint: the dA carry reaches only du and the dA carry, linearly (the GPU backward's B2 / B3 split)",
          "[chunked][vla][adjoint]") {
  // gpu/chunked_vla_backward.cu writes dq, dk, dv in B2, whose walks start from dA = 0, and adds the carried
  // Sigma's part of du in B3 by (A5), (A6) alone. That holds if, per chunk, a dA carry changes nothing but du
  // and the dA carry at the chunk's start, and does so linearly: adjoint(dS, dz, Sigma) = adjoint(dS, dz, 0)
  // + adjoint with dO = 0, dS = dz = 0 from Sigma. If this fails, the split misses a term of dA (a GPU du or
  // dA chain wrong where Sigma_b != 0, i.e. every group but the last).
  const int d = 6, T = 60;
  const HeadStream s = chunk_test_stream(d, T, 31);
  VlaOptions opt;
  opt.penalty.refresh_period = 20;
  opt.penalty.refresh_eta = 0.05;
  const auto seq = sequential<mp50>(opt, s, random_dO(T, d, 37));
  const VlaFeatures<mp50> f = vla_features<mp50>(seq.x.q, seq.x.k, seq.x.u, opt);
  std::vector<VlaChunkStart<mp50>> starts;
  vla_chunked<mp50>(f, seq.x.v, opt, 8, {}, &starts);  // chunks of 8, 8, 4 per refresh segment
  const Mat<mp50> no_dO = Mat<mp50>::Zero(T, d);
  const auto with_dO = chunk_adjoint_inputs(f, seq.x, seq.dO, opt), without_dO = chunk_adjoint_inputs(f, seq.x, no_dO, opt);
  std::mt19937_64 gen(41);
  std::normal_distribution<double> n(0.0, 1.0);
  const auto random = [&](int r, int c) {
    Mat<mp50> m(r, c);
    for (auto& e : m.reshaped()) e = mp50(n(gen));
    return m;
  };
  double worst = 0;
  for (const auto& c : starts) {
    const Mat<mp50> Sigma = [&] { const Mat<mp50> m = random(d, d); return Mat<mp50>(m + m.transpose()); }();
    const VlaChunkCarry<mp50> carry{random(d, d), Vec<mp50>(random(d, 1)), Sigma}, no_dA{carry.dS, carry.dz, Mat<mp50>::Zero(d, d)},
        only_dA{Mat<mp50>::Zero(d, d), Vec<mp50>::Zero(d), Sigma};
    HeadGrads<mp50> g_all(T, d), g_b2(T, d), g_sigma(T, d);
    const auto out_all = vla_chunk_adjoint(with_dO, c.c0, c.n, c.A, c.S, c.z, carry, g_all);
    const auto out_b2 = vla_chunk_adjoint(with_dO, c.c0, c.n, c.A, c.S, c.z, no_dA, g_b2);
    const auto out_sigma = vla_chunk_adjoint(without_dO, c.c0, c.n, c.A, c.S, c.z, only_dA, g_sigma);
    INFO("chunk at token " << c.c0 << ", " << c.n << " tokens");
    const auto rows = [&](const Mat<mp50>& m) { return Mat<mp50>(m.middleRows(c.c0, c.n)); };
    const auto diff = [](const Mat<mp50>& a, const Mat<mp50>& b) { return double((a - b).norm() / b.norm()); };
    // dq, dk, dv do not read the dA carry at all: the same numbers.
    CHECK(rows(g_all.dq) == rows(g_b2.dq));
    CHECK(rows(g_all.dk) == rows(g_b2.dk));
    CHECK(rows(g_all.dv) == rows(g_b2.dv));
    CHECK(out_all.dS == out_b2.dS);
    CHECK(out_all.dz == out_b2.dz);
    // du and the dA carry: B2's part plus Sigma's part alone.
    const double e_du = diff(Mat<mp50>(rows(g_b2.du) + rows(g_sigma.du)), rows(g_all.du));
    const double e_dA = diff(Mat<mp50>(out_b2.dA + out_sigma.dA), out_all.dA);
    CHECK(e_du <= 1e-40);
    CHECK(e_dA <= 1e-40);
    CHECK(diff(rows(g_sigma.du), rows(g_all.du)) > 1e-3);  // Sigma's part is not negligible: the check has teeth
    worst = std::max({worst, e_du, e_dA});
  }
  WARN("chunk adjoint, mp50, " << starts.size() << " chunks: du and dA = B2's + Sigma's to " << worst);
}
