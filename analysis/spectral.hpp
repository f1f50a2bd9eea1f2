#pragma once
// Spectral norms of the per-step state Jacobian, three independent ways, and of products of them.
//
// Every memory rule's step maps S_{t-1} -> S_{t-1} M_t + (terms free of S_{t-1}), with
//   M_t = decay * I - k_read w^T        (core/rules/memory_rule.hpp WriteRecord; (d, d))
// so dS_t/dS_{t-1} acts as right-multiplication by M_t, whose operator norm (Frobenius -> Frobenius)
// is ||M_t||_2. For VLA M_t = I - k_hat alpha_hat^T, the transpose of the paper's eq. (14)
// J_t = I - alpha_hat k_hat^T: same singular values.
//
// Closed form (derivation, used because eq. 14 is a rank-1 perturbation of c I):
//   M = c I - a b^T.  M^T M = c^2 I + N with N = -c (a b^T + b a^T) + |a|^2 b b^T, whose range lies in
//   span{a, b}; on the orthogonal complement M^T M = c^2 I. Writing N = X Y^T with X = [a, b],
//   Y = [-c b, |a|^2 b - c a], the non-zero eigenvalues of N are those of the 2x2 matrix Y^T X:
//     trace = |a|^2 |b|^2 - 2 c p,   det = c^2 (p^2 - |a|^2 |b|^2) <= 0   (p = a.b, Cauchy-Schwarz)
//   so mu_max = (trace + sqrt(trace^2 - 4 det)) / 2 >= 0 and, for d >= 2,
//     sigma_max^2 = c^2 + mu_max.
//   Unit a, b, c = 1: sigma_max^2 = 1 + (1 - 2p + sqrt(5 - 4p)) / 2, which is 1 only at p = 1 (a = b,
//   a projection) and the golden ratio squared at p = 0. For d = 1, M is the scalar c - a b.
#include "core/scalar.hpp"

#include <Eigen/Dense>
#include <Eigen/SVD>

#include <cmath>
#include <random>

namespace vla::analysis {

// ||c I - a b^T||_2 by the closed form above; a, b: (d).
template <class T> T rank1_perturbation_norm(const T& c, const Vec<T>& a, const Vec<T>& b) {
  using std::abs;
  using std::sqrt;
  if (a.size() == 1) return abs(T(c - a(0) * b(0)));
  const T p = a.dot(b), aa = a.squaredNorm(), bb = b.squaredNorm();
  const T tr = aa * bb - T(2) * c * p;
  const T det = c * c * (p * p - aa * bb);
  T disc = tr * tr - T(4) * det;
  if (disc < T(0)) disc = T(0);  // rounding only: det <= 0 makes the exact discriminant >= tr^2
  T mu = (tr + sqrt(disc)) / T(2);
  if (mu < T(0)) mu = T(0);
  return sqrt(T(c * c + mu));
}

// Largest singular value by power iteration on M^T M, from a fixed pseudo-random start (a start
// orthogonal to the top singular vector has probability zero). Stops when the Rayleigh quotient
// changes by less than tol (relative) or after max_iter iterations.
template <class T>
T power_iteration_norm(const Mat<T>& M, double tol = 1e-14, int max_iter = 5000, std::uint64_t seed = 7) {
  using std::abs;
  using std::sqrt;
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> n(0.0, 1.0);
  Vec<T> x(M.cols());  // (d)
  for (Eigen::Index i = 0; i < x.size(); ++i) x(i) = T(n(gen));
  x /= x.norm();
  T prev(0);
  for (int it = 0; it < max_iter; ++it) {
    Vec<T> y = M.transpose() * (M * x);
    const T lambda = x.dot(y);  // Rayleigh quotient of M^T M, -> sigma_max^2
    const T ny = y.norm();
    if (ny == T(0)) return T(0);
    x = y / ny;
    if (it > 0 && abs(T(lambda - prev)) <= T(tol) * abs(lambda)) return sqrt(lambda);
    prev = lambda;
  }
  return sqrt(prev);
}

// Largest singular value from a full SVD (Eigen's JacobiSVD, which runs on the MPFR types too).
template <class T> T svd_norm(const Mat<T>& M) {
  Eigen::JacobiSVD<Mat<T>> svd(M);
  return svd.singularValues()(0);
}

// The per-step map M = decay I - k_read w^T; (d, d). An empty w means M = decay I.
template <class T> Mat<T> step_map(const Vec<T>& k_read, const Vec<T>& w, const T& decay) {
  const Eigen::Index d = k_read.size();
  Mat<T> M = Mat<T>::Identity(d, d) * decay;
  if (w.size() == d) M -= k_read * w.transpose();
  return M;
}

// Largest Lyapunov exponent of the product M_1 M_2 ... M_T (the order in which S_0 M_1 ... M_T
// propagates a perturbation of S_0) by repeated QR: propagate an orthonormal basis Q (d, k) through
// M_t^T, re-orthonormalise (Householder QR), and average log |R_jj|. Column 1 gives the largest
// exponent. Accumulates in T to keep the running sum exact enough for mp50.
template <class T> class LyapunovQR {
 public:
  // The start basis is a fixed pseudo-random orthonormal (d, k) matrix: a coordinate start could be
  // orthogonal to the top direction (e.g. for a diagonal map) and would never see it.
  LyapunovQR(int d, int k = 1, std::uint64_t seed = 11) : sums_(Vec<T>::Zero(k)) {
    std::mt19937_64 gen(seed);
    std::normal_distribution<double> n(0.0, 1.0);
    Mat<T> G(d, k);
    for (int j = 0; j < k; ++j)
      for (int i = 0; i < d; ++i) G(i, j) = T(n(gen));
    Eigen::HouseholderQR<Mat<T>> qr(G);
    Q_ = qr.householderQ() * Mat<T>::Identity(d, k);
  }
  void push(const Mat<T>& M) {
    using std::abs;
    using std::log;
    Mat<T> Z = M.transpose() * Q_;  // (d, k): a perturbation x of a row of S_0 becomes M^T x
    Eigen::HouseholderQR<Mat<T>> qr(Z);
    const Mat<T> R = qr.matrixQR().topRows(Z.cols()).template triangularView<Eigen::Upper>();
    Q_ = qr.householderQ() * Mat<T>::Identity(Z.rows(), Z.cols());
    for (Eigen::Index j = 0; j < Z.cols(); ++j) sums_(j) += T(log(abs(R(j, j))));
    ++steps_;
  }
  // Largest exponent (per step, natural log); -inf when a map was singular in that direction.
  double largest() const { return steps_ ? to_double(sums_(0)) / steps_ : 0.0; }
  int steps() const { return steps_; }

 private:
  Mat<T> Q_;
  Vec<T> sums_;
  int steps_ = 0;
};

}  // namespace vla::analysis
