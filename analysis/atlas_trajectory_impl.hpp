#pragma once
// Template body of atlas_trajectory, instantiated per precision in atlas_trajectory_lowp.cpp and
// atlas_trajectory_mp50.cpp.
#include "analysis/atlas_trajectory.hpp"
#include "analysis/rule_zoo.hpp"

#include <Eigen/Eigenvalues>

namespace vla::analysis {

template <class P>
AtlasTrajectory atlas_trajectory_in(const std::string& mixer, const MixerConfig& cfg, const HeadStream& stream) {
  using C = typename P::compute_t;
  AtlasTrajectory r;
  with_analysis_rule<P>(mixer, cfg, [&](auto rule) {
    drive(rule, stream, [&](int t, auto& state, auto& out, const StepRecord<C>& rec) {
      r.S.push_back(cast_matrix<double>(state.memory.S(0)));
      r.out.push_back(cast_matrix<double>(out).col(0));
      bool finite = all_finite(r.S.back()) && all_finite(r.out.back());
      double lmin = kNotApplicable;
      if constexpr (requires { state.tracker; }) {
        const Mat<double> A = cast_matrix<double>(state.tracker.A(0));  // (d, d)
        if (all_finite(A)) {
          // The symmetric part: SelfAdjointEigenSolver reads one triangle; rounding may make A
          // slightly asymmetric and positive definiteness is a property of the symmetric part.
          const Mat<double> As = (A + A.transpose()) / 2;
          lmin = Eigen::SelfAdjointEigenSolver<Mat<double>>(As, Eigen::EigenvaluesOnly).eigenvalues()(0);
          if (!(lmin > 0) && r.first_A_not_pd == 0) r.first_A_not_pd = t;
        } else {
          finite = false;
        }
      }
      r.A_min_eig.push_back(lmin);
      if (!finite && r.first_nonfinite == 0) r.first_nonfinite = t;
      r.guard_fires += rec.stats[0].guard_fired ? 1 : 0;
      r.renorms += rec.stats[0].renormalised ? 1 : 0;
    });
  });
  return r;
}

}  // namespace vla::analysis
