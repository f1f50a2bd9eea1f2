// InversePenaltyTracker: Sherman-Morrison / Woodbury against direct inversion (mp50), the delta guard
// policies, and MemoryMatrixManager's renormalisation.
#include "core/inverse_penalty_tracker.hpp"
#include "core/memory_matrix_manager.hpp"

#include <catch2/catch.hpp>

#include <Eigen/LU>

#include <random>

using namespace vla;
using P50 = Precision<mp50>;

namespace {

// Penalty directions as Alg. 1 line 10 makes them: unit vectors scaled by 1/sqrt(d).
Mat<mp50> random_directions(std::mt19937_64& g, int d, int r) {
  std::normal_distribution<double> n;
  Mat<mp50> U(d, r);
  for (int j = 0; j < r; ++j) {
    Vec<mp50> x(d);
    for (int i = 0; i < d; ++i) x(i) = mp50(n(g));
    U.col(j) = x / mp50(x.norm()) / mp50(sqrt(mp50(d)));
  }
  return U;
}

double rel_diff(const Mat<mp50>& a, const Mat<mp50>& b) { return to_double(mp50((a - b).norm() / b.norm())); }

}  // namespace

TEST_CASE("Sherman-Morrison A_t equals the directly inverted penalty, with and without refresh (mp50)", "[tracker]") {
  const int d = 8, T = 45;
  const double lambda0 = 0.1, eta = 1e-3;
  // Error budget in units of u = 2^-167: each rank-1 update and each direct inverse (partial-pivot
  // LU) perturbs A by O(d * kappa * u) relative, and T updates accumulate at most linearly. kappa of
  // M_t = lambda0 I + sum u u^T is at most (lambda0 + T * ||u||^2) / lambda0 = (0.1 + 45/8)/0.1 < 60.
  // So tol = 10 * T * d * 60 * u. A failure means the tracker is not the inverse of the penalty of
  // eq. (8)/(15), i.e. a wrong Sherman-Morrison formula (sign, denominator, or order with the refresh).
  const double tol = 10.0 * T * d * 60 * unit_roundoff<mp50>();
  for (const int period : {0, 20}) {
    INFO("refresh period " << period);
    PenaltyOptions o;
    o.lambda0 = lambda0;
    o.refresh_period = period;
    o.refresh_eta = eta;
    InversePenaltyTracker<P50> tr(1, d, o);
    std::mt19937_64 g(11);
    const Mat<mp50> I = Mat<mp50>::Identity(d, d);
    // Direct formula. Without refresh: M_t = lambda0 I + sum_{s<=t} u_s u_s^T, A_t = M_t^{-1}.
    // With refresh (Alg. 1 lines 15-16, A += eta I after steps t = 0 mod period) the penalty is no
    // longer a sum of rank-one terms: M_t = M_{t-1} + u_t u_t^T, then at a refresh step
    // A_t = (M_{t-1} + u_t u_t^T)^{-1} + eta I, i.e. M_t = ((M_{t-1} + u_t u_t^T)^{-1} + eta I)^{-1}.
    Mat<mp50> M = I * mp50(lambda0);
    double worst = 0;
    for (int t = 1; t <= T; ++t) {
      const Mat<mp50> U = random_directions(g, d, 1);
      const auto r = tr.update(0, U);
      tr.advance();
      CHECK_FALSE(r.guard_fired);  // delta = 1 + u^T A u >= 1 for SPD A: the guard never fires here
      M = M + U * U.transpose();
      Mat<mp50> A_direct = M.inverse();
      if (period > 0 && t % period == 0) {
        A_direct += I * mp50(eta);
        M = A_direct.inverse();
      }
      worst = std::max(worst, rel_diff(tr.A(0), A_direct));
    }
    INFO("worst relative Frobenius difference " << worst << ", tol " << tol);
    CHECK(worst < tol);
  }
}

TEST_CASE("Woodbury rank r: r = 1 equals Sherman-Morrison, rank r equals r sequential rank-1 updates (mp50)", "[tracker]") {
  const int d = 8, T = 12, r = 3;
  // Both sides are exact identities in real arithmetic (Woodbury with a 1x1 capacitance matrix is
  // Sherman-Morrison; a rank-r update of M equals r rank-1 updates). They differ only by rounding:
  // T*r updates each O(d * kappa * u) with kappa < (0.1 + T*r/8)/0.1 < 50, tol = 10 * T*r * d * 50 * u.
  // A failure means the Woodbury path (LDL^T of I + U^T A U, the triangular solves) is wrong.
  const double tol = 10.0 * T * r * d * 50 * unit_roundoff<mp50>();
  PenaltyOptions o;
  o.refresh_period = 0;
  // r = 1 through the Woodbury code: the tracker calls woodbury() only for U with > 1 columns, so
  // feed a 2-column U whose second column is zero (C = diag(1 + u^T A u, 1)): the result must equal
  // one rank-1 Sherman-Morrison step.
  InversePenaltyTracker<P50> sm(1, d, o), wb(1, d, o), seq(1, d, o);
  o.rank = r;
  InversePenaltyTracker<P50> wr(1, d, o);
  std::mt19937_64 g(5);
  for (int t = 0; t < T; ++t) {
    const Mat<mp50> u = random_directions(g, d, 1);
    Mat<mp50> U2 = Mat<mp50>::Zero(d, 2);
    U2.col(0) = u;
    sm.update(0, u);
    wb.update(0, U2);
    sm.advance();
    wb.advance();
    const Mat<mp50> U = random_directions(g, d, r);
    wr.update(0, U);
    wr.advance();
    for (int j = 0; j < r; ++j) seq.update(0, Mat<mp50>(U.col(j)));
    seq.advance();
  }
  CHECK(rel_diff(wb.A(0), sm.A(0)) < tol);
  CHECK(rel_diff(wr.A(0), seq.A(0)) < tol);
}

TEST_CASE("delta guard: Clamp (Alg. 1 line 13) and SkipAddEps (spec 001) on an indefinite A", "[tracker]") {
  // Hand-built: A = -I makes delta = 1 + u^T A u = 1 - ||u||^2 = 0 for a unit u, below eps = 1e-4.
  // Clamp must update with delta = eps; SkipAddEps must leave the rank-1 term out and add eps I.
  // Double arithmetic on these small integers and eps is exact up to one rounding per entry, so the
  // comparison is at 4 u_double relative. A failure means the policies are swapped or misapplied.
  const int d = 3;
  const double eps = 1e-4;
  Mat<double> u = Mat<double>::Zero(d, 1);
  u(0, 0) = 1.0;
  for (const auto policy : {DeltaPolicy::Clamp, DeltaPolicy::SkipAddEps}) {
    PenaltyOptions o;
    o.eps = eps;
    o.policy = policy;
    o.refresh_period = 0;
    InversePenaltyTracker<Precision<double>> tr(1, d, o);
    tr.A(0) = -Mat<double>::Identity(d, d);
    const auto r = tr.update(0, u);
    CHECK(r.delta == 0.0);
    CHECK(r.guard_fired);
    Mat<double> expected = -Mat<double>::Identity(d, d);
    if (policy == DeltaPolicy::Clamp) expected(0, 0) -= 1.0 / eps;       // z = A u = -e1, A - z z^T / eps
    else expected.diagonal().array() += eps;                              // skip, then + eps I
    CHECK((tr.A(0) - expected).norm() <= 4 * unit_roundoff<double>() * expected.norm());
  }
  // A healthy delta (A = A_0 SPD) fires neither guard.
  InversePenaltyTracker<Precision<double>> ok(1, d, PenaltyOptions{});
  CHECK_FALSE(ok.update(0, u * 0.5).guard_fired);
}

TEST_CASE("MemoryMatrixManager renormalisation caps ||S||_F at the threshold and is off by default", "[memory]") {
  // A write of norm 100 against a threshold of 1: S must come back with norm 1 (up to the rounding
  // of one scaling, a few u_double), flagged. Without the option, S keeps its norm. A failure means
  // the 001 safety valve is either inert or always on.
  Vec<double> v = Vec<double>::Constant(4, 50.0), w = Vec<double>::Zero(4);
  w(0) = 1.0;
  MemoryMatrixManager<Precision<double>>::Options on{true, 1.0};
  MemoryMatrixManager<Precision<double>> capped(1, 4, 4, on), plain(1, 4, 4);
  const auto rc = capped.additive_write(0, w, v);
  const auto rp = plain.additive_write(0, w, v);
  CHECK(rc.renormalised);
  CHECK(capped.frobenius_norm(0) <= 1.0 * (1 + 8 * unit_roundoff<double>()));
  CHECK(capped.frobenius_norm(0) >= 1.0 * (1 - 8 * unit_roundoff<double>()));
  CHECK_FALSE(rp.renormalised);
  CHECK(plain.frobenius_norm(0) == Approx(100.0).epsilon(1e-15));
  // Below the threshold nothing changes.
  MemoryMatrixManager<Precision<double>> small(1, 4, 4, MemoryMatrixManager<Precision<double>>::Options{true, 1e3});
  CHECK_FALSE(small.residual_write(0, w, w, v).renormalised);
  CHECK(small.frobenius_norm(0) == Approx(100.0).epsilon(1e-15));
}
