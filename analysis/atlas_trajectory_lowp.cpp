// The hardware and emulated formats of the atlas (everything but the MPFR reference).
#include "analysis/atlas_trajectory_impl.hpp"

namespace vla::analysis {

AtlasTrajectory atlas_trajectory_mp50(const std::string& mixer, const MixerConfig& cfg, const HeadStream& stream);

AtlasTrajectory atlas_trajectory(const std::string& precision, const std::string& mixer, const MixerConfig& cfg,
                                 const HeadStream& stream) {
  if (precision == "half") return atlas_trajectory_in<Precision<half>>(mixer, cfg, stream);
  if (precision == "bfloat16") return atlas_trajectory_in<Precision<bfloat16>>(mixer, cfg, stream);
  if (precision == "float") return atlas_trajectory_in<Precision<float>>(mixer, cfg, stream);
  if (precision == "double") return atlas_trajectory_in<Precision<double>>(mixer, cfg, stream);
  if (precision == "half+float") return atlas_trajectory_in<Precision<half, float>>(mixer, cfg, stream);
  if (precision == "bfloat16+float") return atlas_trajectory_in<Precision<bfloat16, float>>(mixer, cfg, stream);
  if (precision == "mp50") return atlas_trajectory_mp50(mixer, cfg, stream);
  throw std::invalid_argument(fmt::format("--precisions: unknown precision '{}' (allowed: {})", precision, kAtlasPrecisions));
}

}  // namespace vla::analysis
