#include "analysis/atlas_trajectory.hpp"

#include <Eigen/Eigenvalues>

namespace vla::analysis {

double min_eigenvalue_of_symmetric_part(const Mat<double>& A) {
  const Mat<double> As = (A + A.transpose()) / 2;
  return Eigen::SelfAdjointEigenSolver<Mat<double>>(As, Eigen::EigenvaluesOnly).eigenvalues()(0);
}

AtlasTrajectory atlas_trajectory(const std::string& precision, const std::string& mixer, const MixerConfig& cfg,
                                 const HeadStream& stream) {
  return with_precision_in<AtlasPrecisions>(precision, "--precisions", [&](auto p) {
    return atlas_trajectory_in<decltype(p)>(mixer, cfg, stream);
  });
}

}  // namespace vla::analysis
