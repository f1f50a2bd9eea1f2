#include "analysis/nlms_step.hpp"

#include "core/rules/nlms_memory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

namespace vla::analysis {

namespace {

template <class T> Mat<T> gaussian(std::mt19937_64& gen, int rows, int cols, double scale = 1.0) {
  std::normal_distribution<double> n(0.0, 1.0);
  Mat<double> m(rows, cols);
  for (auto& e : m.reshaped()) e = scale * n(gen);
  return cast_matrix<T>(m);
}

// l(S) = 1/2 ||S x - y||^2 + lambda/2 ||S||_F^2, S (d_v, d_k): eq. (3.1) in the stored orientation.
template <class T> T ridge_loss(const Mat<T>& S, const Vec<T>& x, const Vec<T>& y, const T& lambda) {
  return T(T((S * x - y).squaredNorm()) / T(2) + lambda * T(S.squaredNorm()) / T(2));
}

std::string show(const Mat<double>& m) {
  std::string s = "(";
  for (Eigen::Index i = 0; i < m.size(); ++i) s += fmt::format("{}{:.3g}", i ? ", " : "", m(i));
  return s + ")";
}

}  // namespace

template <class T>
std::vector<NlmsDescent> nlms_descent(const std::vector<double>& betas, const std::vector<int>& dims, int trials, std::uint64_t seed) {
  const NlmsOptions opt;  // the rule's defaults: ridge, eps_gamma, eps
  std::vector<NlmsDescent> out;
  for (const double beta : betas) {
    NlmsDescent r{beta};
    r.max_excess = -std::numeric_limits<double>::infinity();
    std::mt19937_64 gen(seed);  // the same inputs for every beta
    std::uniform_real_distribution<double> log_scale(-2.0, 2.0);
    for (const int d : dims)
      for (int i = 0; i < trials; ++i) {
        const Mat<T> S = gaussian<T>(gen, d, d);
        const Vec<T> x = gaussian<T>(gen, d, 1, std::pow(10.0, log_scale(gen)));
        const Vec<T> y = gaussian<T>(gen, d, 1);
        const auto w = nlms_write<T>(S, x, y, Vec<T>::Constant(d, T(beta)), T(1), opt);
        const T before = ridge_loss(S, x, y, w.coef.lambda), after = ridge_loss(w.S, x, y, w.coef.lambda);
        // eq. (3.5), row by row: grad_j = -(y_j - s_j . x) x + lambda s_j (s_j row j of S)
        const T L = w.coef.n2 + w.coef.lambda;
        const Mat<T> grad = -w.e * x.transpose() + w.coef.lambda * S;
        T bound = before;
        for (int j = 0; j < d; ++j) bound -= w.coef.eta(j) * (T(2) - w.coef.eta(j) * L) / T(2) * T(grad.row(j).squaredNorm());
        ++r.steps;
        r.max_ratio = std::max(r.max_ratio, to_double(T(after / before)));
        r.max_excess = std::max(r.max_excess, to_double(T((after - bound) / before)));
        if (after > before) {
          if (r.ascents == 0)
            r.first_ascent = fmt::format("d = {}: S = {}, x = {}, y = {}: l goes from {:.6g} to {:.6g}", d, show(cast_matrix<double>(S)),
                                         show(cast_matrix<double>(Mat<T>(x))), show(cast_matrix<double>(Mat<T>(y))), to_double(before),
                                         to_double(after));
          ++r.ascents;
        }
      }
    out.push_back(r);
  }
  return out;
}

template <class T>
std::vector<NlmsScaleInvariance> nlms_scale_invariance(const std::vector<double>& scales, double eps, int d, int steps,
                                                       std::uint64_t seed) {
  NlmsOptions opt;
  opt.eps = eps;
  std::mt19937_64 gen(seed);
  const Mat<T> X = gaussian<T>(gen, d, steps), V = gaussian<T>(gen, d, steps);
  const Mat<T> beta = gaussian<T>(gen, d, steps).unaryExpr([](const T& g) { return T(T(2) * sigmoid(g)); });
  std::vector<NlmsScaleInvariance> out;
  for (const double c : scales) {
    NlmsScaleInvariance r{c, eps};
    const T cc = from_double<T>(c);
    Mat<T> S = Mat<T>::Zero(d, d), Sc = Mat<T>::Zero(d, d);
    for (int t = 0; t < steps; ++t) {
      const auto w = nlms_write<T>(S, Vec<T>(X.col(t)), Vec<T>(V.col(t)), Vec<T>(beta.col(t)), T(1), opt);
      const auto wc = nlms_write<T>(Sc, Vec<T>(cc * X.col(t)), Vec<T>(V.col(t)), Vec<T>(beta.col(t)), T(1), opt);
      r.max_residual = std::max(r.max_residual, to_double(T((wc.e - w.e).norm() / w.e.norm())));
      S = w.S;
      Sc = wc.S;
      r.max_state = std::max(r.max_state, to_double(T((cc * Sc - S).norm() / S.norm())));
    }
    out.push_back(r);
  }
  return out;
}

template std::vector<NlmsDescent> nlms_descent<double>(const std::vector<double>&, const std::vector<int>&, int, std::uint64_t);
template std::vector<NlmsDescent> nlms_descent<mp50>(const std::vector<double>&, const std::vector<int>&, int, std::uint64_t);
template std::vector<NlmsScaleInvariance> nlms_scale_invariance<double>(const std::vector<double>&, double, int, int, std::uint64_t);
template std::vector<NlmsScaleInvariance> nlms_scale_invariance<mp50>(const std::vector<double>&, double, int, int, std::uint64_t);

}  // namespace vla::analysis
