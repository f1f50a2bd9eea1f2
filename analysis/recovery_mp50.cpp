// mp50 instantiations of the recovery analysis (separate TU: MPFR templates compile slowly).
#include "analysis/recovery_impl.hpp"

namespace vla::analysis {

double recovery_error_mp50(const std::string& mixer, const MixerConfig& cfg, const HeadStream& stream) {
  return recovery_error_in<Precision<mp50>>(mixer, cfg, stream);
}
template double least_squares_recovery_error<mp50>(const Mat<double>&, const Mat<double>&);

}  // namespace vla::analysis
