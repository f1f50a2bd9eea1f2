// Known answers for the recovery analysis: the exact least-squares memory recovers independent keys,
// the key families have the Gram matrices they claim, and rules that are exact for orthonormal keys
// (delta rule, linear attention) are measured as exact.
#include "analysis/recovery.hpp"
#include "analysis/recovery_impl.hpp"

#include <catch2/catch.hpp>

#include <random>

using namespace vla;
using namespace vla::analysis;

namespace {
Mat<double> values(int d, int n) {
  std::mt19937_64 gen(5);
  std::normal_distribution<double> g(0.0, 1.0);
  Mat<double> V(d, n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j) V(j, i) = g(gen);
  return V;
}
constexpr double u = 0x1p-53;
}  // namespace

TEST_CASE("key families have the stated Gram matrices and survive phi^-1 then phi", "[analysis]") {
  const int d = 8, n = 5;
  const Mat<double> K = make_keys(KeyKind::Correlated, d, n, 0.4, 1);
  const Mat<double> G = K.transpose() * K;  // should be 0.6 I + 0.4 1 1^T
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) CHECK(std::abs(G(i, j) - (i == j ? 1.0 : 0.4)) <= 16 * u);  // a few roundings
  // phi(phi^-1(k)) = k up to rounding (and zeros come back as e^-200, below any format we compare in).
  const Mat<double> back = phi_inverse(K).unaryExpr([](double x) { return elu_plus_one(x); });
  CHECK((back - K).cwiseAbs().maxCoeff() <= 4 * u);
  CHECK_THROWS_AS(make_keys(KeyKind::Orthonormal, 4, 5, 0, 1), std::invalid_argument);  // n > d has no orthonormal family
}

TEST_CASE("exact least squares recovers independent keys, double and mp50", "[analysis]") {
  const int d = 12;
  for (auto kind : {KeyKind::Orthonormal, KeyKind::Correlated}) {
    const Mat<double> K = make_keys(kind, d, d, 0.5, 2), V = values(d, d);
    // Orthonormal / well-conditioned (condition number sqrt((1+(d-1)rho)/(1-rho)) = 3.6 at rho 0.5) keys: error is a few
    // hundreds of u at most; 1e4 u (double) and 1e4 u_mp50 (mp50) would still catch any solver defect.
    CHECK(least_squares_recovery_error<double>(K, V) <= 1e4 * u);
    CHECK(least_squares_recovery_error<mp50>(K, V) <= 1e4 * unit_roundoff<mp50>());
  }
}

TEST_CASE("the delta rule and linear attention recover orthonormal keys exactly (mp50)", "[analysis]") {
  // With orthonormal keys S_{i-1} k_i = 0, so both rules store v_i k_i^T exactly: the measured error
  // must be at mp50 rounding level. If it were not, the recovery driver (keys through phi^-1, the
  // rule's own k_hat) would be broken.
  const int d = 8;
  const Mat<double> K = make_keys(KeyKind::Orthonormal, d, d, 0, 3), V = values(d, d);
  const HeadStream s = recovery_stream(K, V, 3);
  MixerConfig cfg;
  cfg.deltanet_gated = false;
  for (const char* m : {"deltanet", "linear"}) {
    INFO(m);
    CHECK(recovery_error("mp50", m, cfg, s) <= 1e3 * unit_roundoff<mp50>());
    CHECK(recovery_error("double", m, cfg, s) <= 64 * u);
  }
}

TEST_CASE("head streams have one column per token in every input, and a misshapen one is refused", "[analysis]") {
  // token_inputs reads column t of q, k, v, u and gate: a gate stored as a column vector (n, 1) was read
  // out of bounds for every t > 0 (and passed unnoticed without Eigen's assertions).
  const int d = 6, n = 4;
  const HeadStream s = recovery_stream(make_keys(KeyKind::Orthonormal, d, n, 0, 3), values(d, n), 3);
  CHECK(s.gate.rows() == 1);
  CHECK(s.gate.cols() == n);
  CHECK_NOTHROW(s.validate());
  HeadStream bad = s;
  bad.gate = Mat<double>::Zero(n, 1);
  CHECK_THROWS_WITH(bad.validate(), Catch::Contains("gate must be (>= 1, 4)"));
  bad = s;
  bad.u = Mat<double>::Zero(d, n - 1);
  CHECK_THROWS_WITH(bad.validate(), Catch::Contains("u must be (6, 4)"));
}
