// analysis/write_selectivity.hpp measures whether a VLA head's writes are orthogonal to the keys before them.
// Its two ends must read as the algebra says: with A fixed the write is the key itself (ratio 1), and the
// classical RLS limit (u = k_hat, lambda0 -> 0, the prior gain) projects each key off the earlier ones (ratio
// ~0 while the keys are independent). A ratio taken over the wrong pairs (s >= t, or the diagonal) or of the
// wrong vectors would miss one end, and a trained model's verdict (studies/penalty-selectivity) would be
// an artefact.
#include "analysis/write_selectivity.hpp"

#include "analysis/direction_spread.hpp"

#include <catch2/catch.hpp>

using namespace vla;
using namespace vla::analysis;

TEST_CASE("write selectivity: A fixed writes along the key, classical RLS orthogonal to the keys before", "[analysis]") {
  const HeadStream s = random_head_stream(16, 12, 5);  // T < d: independent keys

  const WriteSelectivity fixed = write_selectivity(VlaOptions::preset("vla-fixed-a"), s);
  CHECK(fixed.overlap_ratio == Approx(1.0).epsilon(1e-13));
  CHECK(fixed.alignment == Approx(1.0).epsilon(1e-13));

  VlaOptions rls = VlaOptions::preset("vla-rls");
  rls.penalty_source = PenaltySource::Key;
  rls.penalty_scale = 1.0;
  rls.penalty.lambda0 = 1e-10;
  rls.penalty.refresh_period = 0;
  const WriteSelectivity w = write_selectivity(rls, s);
  CHECK(w.overlap_ratio < 1e-6);
  CHECK(w.alignment > 0.0);  // the write keeps the key's new component
  CHECK(w.alignment < 0.999);

  // Algorithm 1 as the paper runs it lies between; the participation ratios are direction_spread's.
  const WriteSelectivity a = write_selectivity(VlaOptions{}, s);
  CHECK(a.overlap_ratio > w.overlap_ratio);
  CHECK(std::abs(a.overlap_ratio - fixed.overlap_ratio) > 1e-3);
  CHECK(a.penalty_directions == Approx(participation_ratio(s.u)).epsilon(1e-15));
  CHECK(a.key_directions > 1.0);
  // write_overlap is the same run without the directions: the same ratio and alignment, bit for bit.
  const WriteSelectivity o = write_overlap(VlaOptions{}, s);
  CHECK(o.overlap_ratio == a.overlap_ratio);
  CHECK(o.alignment == a.alignment);
  CHECK(o.penalty_directions == 0.0);

  VlaOptions r2;
  r2.penalty.rank = 2;
  CHECK_THROWS_WITH(write_selectivity(r2, random_head_stream(16, 4, 1, 2)), Catch::Contains("rank"));
  CHECK_THROWS_WITH(write_selectivity(VlaOptions{}, random_head_stream(16, 1, 1)), Catch::Contains("at least 2 tokens"));
}
