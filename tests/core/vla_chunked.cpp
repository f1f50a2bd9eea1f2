// The chunkwise-parallel VLA (core/rules/vla/chunked.hpp, docs/chunkwise-vla.md) against Algorithm 1 as
// the rule's own step() computes it. In mp50 the two agree to the working precision for every variant,
// chunk size, refresh period and guard policy. In float and bfloat16 both forms are measured against mp50
// with the other chunked rules (tests/core/chunked_forms.cpp).
#include "analysis/chunked_exactness.hpp"
#include "core/rules/vla/chunked.hpp"
#include "core/rules/vla/rule.hpp"

#include <catch2/catch.hpp>

#include <Eigen/Eigenvalues>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

using namespace vla;
using namespace vla::analysis;

namespace {

// Algorithm 1 stepped token by token through VlaRule<Precision<T>>, batch 1: what the chunked form must
// reproduce, including the states it leaves and each step's denominator.
template <class T> struct Recurrence {
  Mat<T> O, alpha;            // (T, d) rows
  std::vector<double> delta;  // (T) before the guard
  int guard_fired = 0;
  Mat<T> S, A;
  Vec<T> z;
};

template <class T> Recurrence<T> recurrence(const VlaOptions& opt, const HeadStream& s) {
  Recurrence<T> r{Mat<T>(s.T, s.d), Mat<T>(s.T, s.d), {}, 0, {}, {}, {}};
  drive(VlaRule<Precision<T>>(opt), s, [&](int t, const auto& st, const auto& out, const auto& rec) {
    r.O.row(t - 1) = cast_matrix<T>(out).transpose();
    r.alpha.row(t - 1) = rec.writes[0].w.transpose();
    r.delta.push_back(rec.stats[0].delta);
    r.guard_fired += rec.stats[0].guard_fired;
    r.S = st.memory.S(0);
    r.A = st.tracker.A(0);
    r.z = st.z[0];
  });
  return r;
}

template <class T>
VlaChunked<T> chunked(const VlaOptions& opt, const HeadStream& s, int chunk, const VlaChunkObserver<T>& obs = {},
                      ProductOperands ops = ProductOperands::Full) {
  auto rows = [](const Mat<double>& m) { return cast_matrix<T>(Mat<double>(m.transpose())); };
  return vla_chunked<T>(vla_features<T>(rows(s.q), rows(s.k), rows(s.u), opt), rows(s.v), opt, chunk, obs, nullptr, ops);
}

double rel(const Mat<mp50>& a, const Mat<mp50>& b) { return to_double(mp50((a - b).norm() / b.norm())); }

// Every way the chunked form can differ from Algorithm 1, in mp50: outputs, write directions, the three
// states, the denominators and the guard count.
void check_equal(const Recurrence<mp50>& rec, const VlaChunked<mp50>& ch, const std::string& what) {
  INFO(what);
  // mp50 carries ~166 bits: the two orders of summation differ by a few thousand roundings of ~1e-50.
  CHECK(rel(ch.O, rec.O) <= 1e-40);
  CHECK(rel(ch.alpha, rec.alpha) <= 1e-40);
  CHECK(rel(ch.S, rec.S) <= 1e-40);
  CHECK(rel(ch.A, rec.A) <= 1e-40);
  CHECK(rel(Mat<mp50>(ch.z), Mat<mp50>(rec.z)) <= 1e-40);
  CHECK(ch.guard_fired == rec.guard_fired);
  double worst = 0;
  for (std::size_t t = 0; t < rec.delta.size(); ++t)
    if (!std::isnan(rec.delta[t])) worst = std::max(worst, std::abs(to_double(ch.delta(t)) - rec.delta[t]) / std::abs(rec.delta[t]));
  CHECK(worst <= 4e-16);  // the recurrence reports delta_t in double
}

}  // namespace

TEST_CASE("chunked VLA equals Algorithm 1 in mp50 for every variant, chunk size and refresh period", "[chunked][vla]") {
  // If this fails, the chunked form is not Algorithm 1: the Woodbury blocks of (V1) are not the
  // recurrence's denominators, the mask of (V3) reads A_{t-1} where line 19 reads A_t (or the reverse for
  // the RLS gain), the refresh lands on the wrong token or is not read by the token it follows, the state
  // (V4) handed to the next chunk is wrong, or the write (V5) reads the wrong key or direction. T = 37 is
  // prime (no chunk size divides it), periods 7 and 20 split chunks that do not divide them.
  const HeadStream s = chunk_test_stream(5, 37, 3);
  std::vector<std::pair<std::string, VlaOptions>> variants;
  for (auto name : VlaOptions::kVariants) variants.emplace_back(std::string(name), VlaOptions::preset(std::string(name)));
  VlaOptions key = VlaOptions::preset("vla");
  key.penalty_source = PenaltySource::Key;  // the RLS / whitening regime of Sec. 7.1: u = k_hat / sqrt(d)
  variants.emplace_back("vla, u from the key", key);
  for (auto& [name, base] : variants)
    for (int period : {20, 7, 0}) {
      VlaOptions opt = base;
      opt.penalty.refresh_period = period;
      opt.penalty.refresh_eta = 0.05;  // large enough that a misplaced refresh shows at once
      const auto rec = recurrence<mp50>(opt, s);
      for (int chunk : {1, 2, 3, 7, 16, 20, 37, 64})
        check_equal(rec, chunked<mp50>(opt, s, chunk), name + ", refresh period " + std::to_string(period) + ", chunk " + std::to_string(chunk));
    }
}

TEST_CASE("chunked VLA applies the delta guard to the same tokens as Algorithm 1, both policies", "[chunked][vla]") {
  // delta_t = 1 + u^T A_{t-1} u lies in [1, 1 + ||A||/d] in exact arithmetic, so eps = 2 at d = 4 makes the
  // guard fire on some tokens and not on others. If this fails, the clamp is applied after the
  // factorisation has used the unclamped pivot (line 13 clamps before A_t is formed), or a skipped token
  // does not end its chunk (spec 001's eps I inside a chunk is not a Woodbury update).
  const HeadStream s = chunk_test_stream(4, 37, 8);
  for (auto policy : {DeltaPolicy::Clamp, DeltaPolicy::SkipAddEps}) {
    VlaOptions opt;
    opt.penalty.eps = 2.0;
    opt.penalty.policy = policy;
    const auto rec = recurrence<mp50>(opt, s);
    INFO((policy == DeltaPolicy::Clamp ? "clamp" : "skip") << ": the guard fired on " << rec.guard_fired << " of 37 tokens");
    CHECK(rec.guard_fired > 0);
    CHECK(rec.guard_fired < 37);
    for (int chunk : {1, 4, 9, 37})
      check_equal(rec, chunked<mp50>(opt, s, chunk), "chunk " + std::to_string(chunk));
  }
}

TEST_CASE("chunked VLA's penalty Gram is SPD with eigenvalues in [1, 1 + ||A||_2 n / d]", "[chunked][vla]") {
  // (V1): G = I + U A_c U^T with A_c positive definite and ||u_t|| = 1/sqrt(d), so lambda_min(G) >= 1 and
  // lambda_max(G) <= 1 + ||A_c||_2 ||U||_F^2 = 1 + ||A_c||_2 n / d, where ||A_c||_2 <= 1/lambda0 + m eta
  // after m refreshes (each Sherman-Morrison step lowers A in the Loewner order). The factorisation the
  // paper's claim worries about is therefore of a matrix with cond <= 1 + 10 n / d at the paper's
  // lambda0 = 0.1 (21 at n = 64, d = 32). If this fails, the Gram is not the one (V1) says, or A lost
  // definiteness (in double, here, it must not).
  const int d = 16, T = 200;
  const HeadStream s = chunk_test_stream(d, T, 17);
  const VlaOptions opt;
  for (int chunk : {8, 64}) {
    double worst_min = 1e300, worst_cond = 0;
    bool within = true;
    int seen = 0;
    const double a_max = 1.0 / opt.penalty.lambda0 + (T / opt.penalty.refresh_period + 1) * opt.penalty.refresh_eta;
    chunked<double>(opt, s, chunk, [&](const Mat<double>& G, const Mat<double>&) {
      const Eigen::SelfAdjointEigenSolver<Mat<double>> es(G);
      const double lo = es.eigenvalues().minCoeff(), hi = es.eigenvalues().maxCoeff();
      worst_min = std::min(worst_min, lo);
      worst_cond = std::max(worst_cond, hi / lo);
      within = within && hi <= (1 + a_max * double(G.rows()) / d) * (1 + 1e-12);
      ++seen;
    });
    INFO("chunk " << chunk << ": " << seen << " chunks, min eigenvalue " << worst_min << ", worst cond " << worst_cond);
    CHECK(seen >= T / chunk);
    CHECK(worst_min >= 1 - 1e-12);
    CHECK(within);
  }
}

TEST_CASE("chunked VLA refuses what it does not cover, naming the parameter", "[chunked][vla]") {
  const HeadStream s = chunk_test_stream(3, 5, 1);
  CHECK_THROWS_WITH(chunked<double>(VlaOptions{}, s, 0), Catch::Contains("chunk"));
  VlaOptions r2;
  r2.penalty.rank = 2;
  CHECK_THROWS_WITH(chunked<double>(r2, s, 2), Catch::Contains("rank"));
  VlaOptions renorm;
  renorm.memory.renormalise = true;
  renorm.memory.renorm_threshold = 1.0;
  CHECK_THROWS_WITH(chunked<double>(renorm, s, 2), Catch::Contains("renormalise_S"));
  const VlaFeatures<double> f{Mat<double>::Ones(5, 3), Mat<double>::Ones(5, 3), Mat<double>::Ones(5, 3), Mat<double>::Ones(4, 3)};
  CHECK_THROWS_WITH(vla_chunked<double>(f, Mat<double>::Ones(5, 3), VlaOptions{}, 2), Catch::Contains("shape"));
}

TEST_CASE("round_to_tf32 rounds to nearest at 11 significant bits, ties to even", "[chunked][vla]") {
  // TF32 keeps 10 mantissa bits: around 1 its spacing is 2^-10. If this fails, the CPU emulation of the
  // GPU's one-pass products rounds to another width or direction, and the GPU test that holds the kernel to
  // it measures against the wrong model.
  const double u = std::ldexp(1.0, -10);
  CHECK(round_to_tf32(1.0 + u) == 1.0 + u);                // representable: unchanged
  CHECK(round_to_tf32(1.0 + 0.5 * u) == 1.0);              // a tie: to the even neighbour below
  CHECK(round_to_tf32(1.0 + 1.5 * u) == 1.0 + 2 * u);      // a tie: to the even neighbour above
  CHECK(round_to_tf32(1.0 + 0.75 * u) == 1.0 + u);         // nearest
  CHECK(round_to_tf32(-(1.0 + 0.75 * u)) == -(1.0 + u));   // symmetric in sign
  CHECK(round_to_tf32(3.0 * std::ldexp(1.0, -140)) == 3.0 * std::ldexp(1.0, -140));  // scale-free
  CHECK(round_to_tf32(1.0 / 3.0) == 1365.0 / 4096.0);      // 1365.33... / 2^12
  CHECK(round_to_tf32(0.0) == 0.0);
  CHECK(std::isinf(round_to_tf32(std::numeric_limits<double>::infinity())));
  CHECK(std::isnan(round_to_tf32(std::numeric_limits<double>::quiet_NaN())));
}

TEST_CASE("chunked VLA with TF32 product operands moves the outputs by TF32 roundings, within their linear bound", "[chunked][vla]") {
  // The emulation the GPU's one-pass TF32 forward is held to (tests/gpu/test_chunked_vla_forward.cpp). Every
  // product operand rounded at 2^-11 must move the outputs far past double's rounding (an emulation that
  // rounds nothing leaves them within ~1e-15: the lower bound 2^-20), and by no more than the GPU tests'
  // linear-growth bound with TF32's unit roundoff, T d 2^-11 (a larger change means something other than
  // the operands' rounding changed). The refresh on and off, chunks that divide T and that do not.
  const int d = 8, T = 40;
  const HeadStream s = chunk_test_stream(d, T, 5);
  for (int period : {20, 0}) {
    VlaOptions opt;
    opt.penalty.refresh_period = period;
    for (int chunk : {1, 7, 16}) {
      const Mat<double> full = chunked<double>(opt, s, chunk).O;
      const Mat<double> tf32 = chunked<double>(opt, s, chunk, {}, ProductOperands::Tf32).O;
      const double e = (tf32 - full).norm() / full.norm();
      INFO("refresh " << period << " chunk " << chunk << ": rel change " << e);
      CHECK(e >= std::ldexp(1.0, -20));
      CHECK(e <= double(T) * d * std::ldexp(1.0, -11));
    }
  }
}
