#include "analysis/write_selectivity.hpp"

#include "analysis/direction_spread.hpp"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

namespace vla::analysis {

namespace {
// The run, its overlap ratio and alignment; K (d x T) its k_hat_t, for the key directions.
WriteSelectivity overlap_of(const VlaOptions& opt, const HeadStream& s, Mat<double>& K) {
  if (opt.penalty.rank != 1) throw std::invalid_argument(fmt::format("rank: write_selectivity reads rank 1 only, got {}", opt.penalty.rank));
  if (s.T < 2) throw std::invalid_argument(fmt::format("T: write_selectivity needs at least 2 tokens, got {}", s.T));
  // Column t: k_hat_t and the write direction as the rule wrote them (StepRecord), the latter made unit (the
  // RLS gain's alpha is not): a direction is what the claim is about.
  K.resize(s.d, s.T);
  Mat<double> W(s.d, s.T);
  drive(VlaRule<Precision<double>>(opt), s, [&](int t, const auto&, const auto&, const StepRecord<double>& rec) {
    K.col(t - 1) = rec.writes[0].k_read;
    const double n = rec.writes[0].w.norm();
    W.col(t - 1) = n > 0 ? Vec<double>(rec.writes[0].w / n) : Vec<double>(rec.writes[0].w);
  });
  const Mat<double> G = K.transpose() * K, GW = K.transpose() * W;  // G(s, t) = k_hat_s . k_hat_t, GW(s, t) = k_hat_s . alpha_hat_t
  double kept = 0, total = 0, align = 0;
  for (int t = 0; t < s.T; ++t) {
    for (int r = 0; r < t; ++r) {
      kept += std::abs(GW(r, t));
      total += std::abs(G(r, t));
    }
    const double nk = K.col(t).norm();
    align += nk > 0 ? GW(t, t) / nk : 0.0;
  }
  if (!(total > 0)) throw std::invalid_argument("keys: no key overlaps an earlier one; the overlap ratio is undefined");
  WriteSelectivity w;
  w.overlap_ratio = kept / total;
  w.alignment = align / s.T;
  return w;
}
}  // namespace

WriteSelectivity write_overlap(const VlaOptions& opt, const HeadStream& s) {
  Mat<double> K;
  return overlap_of(opt, s, K);
}

WriteSelectivity write_selectivity(const VlaOptions& opt, const HeadStream& s) {
  Mat<double> K;
  WriteSelectivity w = overlap_of(opt, s, K);
  w.penalty_directions = participation_ratio(s.u);
  w.key_directions = participation_ratio(K);
  return w;
}

}  // namespace vla::analysis
