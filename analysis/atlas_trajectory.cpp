#include "analysis/atlas_trajectory.hpp"

namespace vla::analysis {

AtlasTrajectory atlas_trajectory(const std::string& precision, const std::string& mixer, const MixerConfig& cfg,
                                 const HeadStream& stream) {
  return with_precision_in<AtlasPrecisions>(precision, "--precisions", [&](auto p) {
    return atlas_trajectory_in<decltype(p)>(mixer, cfg, stream);
  });
}

}  // namespace vla::analysis
