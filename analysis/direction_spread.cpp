#include "analysis/direction_spread.hpp"

#include <Eigen/Eigenvalues>
#include <fmt/format.h>

#include <stdexcept>

namespace vla::analysis {

namespace {
// The columns as unit vectors (a zero column stays zero), and how many are non-zero.
Mat<double> directions(const Mat<double>& X, Eigen::Index& nonzero) {
  Mat<double> D = X;
  nonzero = 0;
  for (Eigen::Index t = 0; t < X.cols(); ++t)
    if (const double n = X.col(t).norm(); n > 0) {
      D.col(t) /= n;
      ++nonzero;
    }
  return D;
}
}  // namespace

double mean_abs_cosine(const Mat<double>& X) {
  const Eigen::Index T = X.cols();
  if (T < 2) throw std::invalid_argument(fmt::format("mean_abs_cosine: needs at least 2 columns, got {}", T));
  Eigen::Index nonzero = 0;
  const Mat<double> D = directions(X, nonzero);
  const Mat<double> cos = (D.transpose() * D).cwiseAbs();  // (T, T), the diagonal 1 (or 0 for a zero column)
  return (cos.sum() - cos.trace()) / (static_cast<double>(T) * static_cast<double>(T - 1));
}

double participation_ratio(const Mat<double>& X) {
  Eigen::Index nonzero = 0;
  const Mat<double> D = directions(X, nonzero);
  if (nonzero == 0) throw std::invalid_argument("participation_ratio: every column is zero");
  const Mat<double> M = D * D.transpose();  // (d, d), trace = the non-zero columns
  const auto lambda = Eigen::SelfAdjointEigenSolver<Mat<double>>(M, Eigen::EigenvaluesOnly).eigenvalues();
  return lambda.sum() * lambda.sum() / lambda.squaredNorm();
}

}  // namespace vla::analysis
