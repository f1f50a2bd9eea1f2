#pragma once
// One run of one rule in one precision over a head stream, keeping what the precision failure atlas
// compares (analysis/precision_atlas.hpp): S_t and o_t (rounded once to double), the first non-finite
// step, the smallest eigenvalue of the stored A_t (VLA; SelfAdjointEigenSolver in double), and how
// often the delta guard fired.
#include "analysis/head_stream.hpp"
#include "core/precision.hpp"
#include "core/rules/non_finite.hpp"
#include "core/rules/registry.hpp"

#include <string>
#include <vector>

namespace vla::analysis {

// The atlas measures every precision against the same rule in mp50, so it runs the precisions of the
// table no finer than that reference (all but mp100), the reference included.
using AtlasReference = Precision<mp50>;
template <class P>
struct NoFinerThanAtlasReference
    : std::bool_constant<ScalarInfo<typename P::compute_t>::significand_bits <=
                         ScalarInfo<AtlasReference::compute_t>::significand_bits> {};
using AtlasPrecisions = Precisions::filter<NoFinerThanAtlasReference>;
static_assert(AtlasPrecisions::contains<AtlasReference>, "the atlas runs its reference too");
inline constexpr std::string_view kAtlasPrecisions = AtlasPrecisions::names();

struct AtlasTrajectory {
  std::vector<Mat<double>> S;    // (T) each (d, d): S_t as stored
  std::vector<Vec<double>> out;  // (T) each (d): o_t as stored
  std::vector<double> A_min_eig; // (T) lambda_min(A_t) of the stored A_t (NaN without A or when non-finite)
  int first_nonfinite = 0;       // first t with a non-finite S_t, A_t, z_t or o_t (core/rules/non_finite.hpp); 0 = never
  std::string first_nonfinite_what;  // which of them came first at that step ("" = never)
  int first_A_not_pd = 0;        // first t with lambda_min(A_t) <= 0; 0 = never (or no A)
  int guard_fires = 0;           // steps where the delta guard changed the update
  int renorms = 0;               // steps where S was renormalised
};

// lambda_min((A + A^T) / 2) in double. The symmetric part: SelfAdjointEigenSolver reads one triangle;
// rounding may make A slightly asymmetric and positive definiteness is a property of the symmetric
// part. Compiled once (atlas_trajectory.cpp) for every precision's run.
double min_eigenvalue_of_symmetric_part(const Mat<double>& A);

// The run in P (one of AtlasPrecisions), defined in atlas_trajectory_impl.hpp and instantiated once
// per precision by generated translation units (core/precision_instances.cmake).
template <class P>
AtlasTrajectory atlas_trajectory_in(const std::string& mixer, const MixerConfig& cfg, const HeadStream& stream);

// The run in the precision named `precision` (one of kAtlasPrecisions; otherwise throws naming --precisions).
AtlasTrajectory atlas_trajectory(const std::string& precision, const std::string& mixer, const MixerConfig& cfg,
                                 const HeadStream& stream);

}  // namespace vla::analysis
