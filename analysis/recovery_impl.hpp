#pragma once
// Template body of recovery_error, instantiated per precision in recovery.cpp / recovery_mp50.cpp.
#include "analysis/recovery.hpp"
#include "analysis/rule_zoo.hpp"

#include <Eigen/SVD>

namespace vla::analysis {

template <class P>
double recovery_error_in(const std::string& mixer, const MixerConfig& cfg, const HeadStream& stream) {
  using C = typename P::compute_t;
  double worst = 0;
  with_analysis_rule<P>(mixer, cfg, [&](auto rule) {
    std::vector<Vec<C>> k_read;  // (n) each (d)
    drive(rule, stream, [&](int t, auto& state, auto&, const StepRecord<C>& rec) {
      k_read.push_back(rec.writes[0].k_read);
      if (t != stream.T) return;
      const Mat<C> S = cast_matrix<C>(state.memory.S(0));  // (d, d) S_n
      for (int i = 0; i < stream.T; ++i) {
        const Vec<C> v = cast_vector<C>(Vec<double>(stream.v.col(i)));
        worst = std::max(worst, to_double(Vec<C>(S * k_read[i] - v).norm()) / to_double(v.norm()));
      }
    });
  });
  return worst;
}

template <class T> double least_squares_recovery_error(const Mat<double>& keys, const Mat<double>& values) {
  const Mat<T> K = cast_matrix<T>(keys), V = cast_matrix<T>(values);  // (d, n)
  // S minimises ||S K - V||_F with minimum norm: S^T solves K^T S^T = V^T in least squares.
  Eigen::JacobiSVD<Mat<T>> svd(Mat<T>(K.transpose()), Eigen::ComputeThinU | Eigen::ComputeThinV);
  const Mat<T> S = Mat<T>(svd.solve(Mat<T>(V.transpose()))).transpose();  // (d, d)
  double worst = 0;
  for (Eigen::Index i = 0; i < K.cols(); ++i)
    worst = std::max(worst, to_double(Vec<T>(S * K.col(i) - V.col(i)).norm()) / to_double(V.col(i).norm()));
  return worst;
}

}  // namespace vla::analysis
