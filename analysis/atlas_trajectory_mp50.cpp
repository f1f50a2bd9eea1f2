// The atlas's ground truth in mp50 (separate TU: MPFR templates compile slowly).
#include "analysis/atlas_trajectory_impl.hpp"

namespace vla::analysis {

AtlasTrajectory atlas_trajectory_mp50(const std::string& mixer, const MixerConfig& cfg, const HeadStream& stream) {
  return atlas_trajectory_in<Precision<mp50>>(mixer, cfg, stream);
}

}  // namespace vla::analysis
