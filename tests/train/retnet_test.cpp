// RetNet (core/rules/retnet/, seed 004 sec. 5.2: S_t = gamma S_{t-1} + k_t^T v_t, o_t = q_t S_t),
// checked like the other rules: the forward against an independent closed form in mp50, every
// precision against mp100 on the precision tests' shared case, and the backward (the rule's adjoint
// through core/model/head.hpp) against central differences, per layer in double and in mp50.
#include "mixer_gradcheck.hpp"

#include "../core/precision_case.hpp"
#include "core/rules/gpu_support.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <random>

using namespace vla;

namespace {

MixerConfig retnet() {
  MixerConfig mc;
  mc.mixer = "retnet";
  return mc;
}

}  // namespace

TEST_CASE("retnet forward equals the seed's parallel form in mp50", "[train][retnet]") {
  // The seed's parallel form O = (Q K^T . D) V, D_ts = gamma^(t-s) (s <= t), computed entry by entry
  // with gamma^(t-s) as a power, against the rule's recurrence; two sequences in one batch, the default
  // gamma and a strong decay. Both are exact up to mp50 rounding (2^-167 ~ 5e-51 per operation, ~T d
  // operations per output): 1e-45 relative to max |o| leaves a 1e3 margin, and a wrong decay exponent,
  // a missing term or a transposed S is O(1) off.
  using P = Precision<mp50>;
  const int T = 16, d = 8, B = 2;
  std::mt19937_64 gen(404);
  std::normal_distribution<double> n(0.0, 1.0);
  std::vector<Mat<mp50>> q(B, Mat<mp50>(d, T)), k = q, v = q;  // column t = token t
  for (int b = 0; b < B; ++b)
    for (auto* m : {&q[b], &k[b], &v[b]})
      for (Eigen::Index i = 0; i < m->size(); ++i) (*m)(i) = mp50(n(gen));
  for (const double gamma : {RetNetOptions{}.gamma, 0.5}) {
    const RetNetRule<P> rule(RetNetOptions{gamma});
    auto st = rule.init(B, d);
    HeadInputs<mp50> in;
    Mat<mp50> out;
    StepRecord<mp50> rec;
    mp50 err = 0, scale = 0, s_err = 0;
    for (int t = 0; t < T; ++t) {
      in.q.resize(d, B); in.k.resize(d, B); in.v.resize(d, B);
      for (int b = 0; b < B; ++b) { in.q.col(b) = q[b].col(t); in.k.col(b) = k[b].col(t); in.v.col(b) = v[b].col(t); }
      rule.step(st, in, out, &rec);
      for (int b = 0; b < B; ++b) {
        Vec<mp50> o = Vec<mp50>::Zero(d);
        Mat<mp50> S = Mat<mp50>::Zero(d, d);
        for (int s = 0; s <= t; ++s) {
          const mp50 D = boost::multiprecision::pow(mp50(gamma), t - s);
          o += D * k[b].col(s).dot(q[b].col(t)) * v[b].col(s);
          S += D * v[b].col(s) * k[b].col(s).transpose();
        }
        err = std::max(err, mp50((out.col(b) - o).cwiseAbs().maxCoeff()));
        scale = std::max(scale, mp50(o.cwiseAbs().maxCoeff()));
        s_err = std::max(s_err, mp50(abs(mp50(rec.stats[b].S_fro) - S.norm()) / S.norm()));
      }
    }
    INFO("gamma " << gamma << ": max |o - parallel form| / max |o| = " << to_double(mp50(err / scale)));
    CHECK(scale > 1);
    CHECK(err <= mp50(1e-45) * scale);
    CHECK(s_err < 1e-15);  // ||S_t||_F reported (in double) from the same state
  }
  CHECK_THROWS_WITH(RetNetRule<P>(RetNetOptions{1.0}), Catch::Contains("gamma"));
}

TEST_CASE("retnet in every precision against mp100", "[train][retnet][precision]") {
  // The precision tests' shared case (tests/core/precision_case.hpp: a single-head layer, d = 8,
  // T = 16) and their tolerance from the storage format's unit roundoff; mp50 to double rounding.
  const Mat<double> ref = test::precision_case_run<Precision<mp100>>("retnet");
  auto check = [&]<class P>(P) {
    const double u = unit_roundoff<typename P::storage_t>();
    const double err = test::precision_case_error(test::precision_case_run<P>("retnet"), ref);
    INFO(P::name() << " retnet: relative error " << err << " = " << err / u << " u, tolerance "
                   << test::precision_case_tolerance(u) / u << " u");
    CHECK(err <= test::precision_case_tolerance(u));
    CHECK(err == err);  // not NaN
  };
  check(Precision<float>{});
  check(Precision<double>{});
  check(Precision<half>{});
  check(Precision<bfloat16>{});
  check(Precision<half, float>{});
  check(Precision<bfloat16, float>{});
  const double err = test::precision_case_error(test::precision_case_run<Precision<mp50>>("retnet"), ref);
  INFO("mp50 retnet: relative error " << err);
  CHECK(err <= 4 * unit_roundoff<double>());
}

TEST_CASE("retnet layer gradcheck (double) and mixer gradcheck (mp50)", "[train][retnet]") {
  // One mixer layer (tests/train/mixer_gradcheck.hpp): dX and every weight of the block against
  // central differences, bound 10x the finite difference's own measured error; in double on the
  // layer checks' shape, in mp50 on the small one (where a double constant in the adjoint would show).
  for (const auto& c : test::mixer_gradcheck<double>(retnet(), test::MixerShape{}, 21)) {
    INFO("retnet " << c.name << ": rel_err " << c.rel_err << " bound " << c.bound << " |g| " << c.grad_norm);
    CHECK(c.grad_norm > 1e-3);
    CHECK(c.pass());
  }
  double worst = 0.0;
  for (const auto& c : test::mixer_gradcheck<mp50>(retnet(), test::MixerShape{4, 2, 3, 5}, 31)) {
    INFO("retnet (mp50) " << c.name << ": rel_err " << c.rel_err << " bound " << c.bound << " |g| " << c.grad_norm);
    CHECK(c.grad_norm > 1e-3);
    CHECK(c.pass());
    worst = std::max(worst, c.rel_err);
  }
  INFO("retnet (mp50) worst relative error " << worst);
  CHECK(worst < 1e-25);  // double's accuracy would be ~1e-10: the check really ran in mp50
}

TEST_CASE("retnet has no GPU kernel and says so", "[train][retnet]") {
  CHECK(gpu_kernel_of(retnet()).path == GpuPath::None);
  CHECK_THROWS_WITH(gpu_kernel_for(retnet(), 32, GpuUse::Training), Catch::Contains("--mixer") && Catch::Contains("'retnet'"));
}
