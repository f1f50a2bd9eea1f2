// The penalty chain (core/rules/vla/penalty_chain.hpp): A at group starts from one 2d x 2d product per group
// and one solve, against InversePenaltyTracker's token-by-token Sherman-Morrison (Alg. 1 lines 12-17).
#include "analysis/random_protocol.hpp"
#include "core/inverse_penalty_tracker.hpp"
#include "core/rules/vla/penalty_chain.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

using namespace vla;

namespace {

using analysis::penalty_directions;

// The tracker's A before every token that starts a group, in precision T.
template <class T> std::vector<Mat<T>> tracker_starts(const Mat<double>& U, const PenaltyOptions& opt, int group_tokens) {
  return tracker_penalties<T>(cast_matrix<T>(U), opt, group_tokens);
}

template <class T> std::vector<Mat<T>> chain(const Mat<double>& U, const PenaltyOptions& opt, int group, int span = 1) {
  const PenaltyChainShape shape{int(U.rows()), opt.refresh_period, group, span};
  return penalty_chain<T>(cast_matrix<T>(U), shape, scalar_cast<T>(opt.lambda0), scalar_cast<T>(opt.refresh_eta));
}

// Worst relative Frobenius distance of a list of A's from the mp50 reference list.
template <class T> double worst_error(const std::vector<Mat<T>>& got, const std::vector<Mat<mp50>>& ref) {
  REQUIRE(got.size() == ref.size());
  double worst = 0;
  for (std::size_t g = 0; g < ref.size(); ++g)
    worst = std::max(worst, to_double(mp50((cast_matrix<mp50>(got[g]) - ref[g]).norm() / ref[g].norm())));
  return worst;
}

}  // namespace

TEST_CASE("penalty chain equals Alg. 1's A at every group start in mp50, refresh on and off", "[chunked][vla][penalty-chain]") {
  // A failure means (P1)-(P3) is not Algorithm 1's A-loop: a wrong Moebius block, refresh placement, or solve;
  // at span > 1 (the pair carried across groups by products, solved once per span, as on the GPU), a wrong
  // product order or a group start read from the wrong pair.
  const int d = 6;
  for (int period : {20, 7, 0})
    for (int group : {1, 3, 16})
      for (int span : {1, 4})
        for (int T : {1, 45, 150}) {
          PenaltyOptions opt;
          opt.refresh_period = period;
          const Mat<double> U = penalty_directions(T, d, 7 + T + period);
          const int group_tokens = PenaltyChainShape{T, period, group}.group_tokens();
          INFO("period " << period << ", group " << group << ", span " << span << ", T " << T);
          // mp50 carries ~166 bits; a few thousand roundings of the products and solves stay far below 1e-40.
          CHECK(worst_error(chain<mp50>(U, opt, group, span), tracker_starts<mp50>(U, opt, group_tokens)) <= 1e-40);
        }
}

TEST_CASE("penalty chain in float rounds no worse than the token recurrence at groups of 16 periods", "[chunked][vla][penalty-chain]") {
  // At the paper's settings (d = 32, lambda0 = 0.1, refresh every 20 tokens, eta = 1e-3) over T = 4000:
  // the chain rounds one solve per 320 tokens, the recurrence one rank-1 update per token. Measured: the
  // chain ~5-7x closer to mp50 (isotropic and skewed directions). A failure means the chain lost its
  // accuracy advantage, which the GPU forward's group length relies on (docs/chunkwise-vla.md).
  const int d = 32, T = 4000, group = 16;
  PenaltyOptions opt;
  for (bool skew : {false, true}) {
    const Mat<double> U = penalty_directions(T, d, 3, skew);
    const auto ref = tracker_starts<mp50>(U, opt, PenaltyChainShape{T, opt.refresh_period, group}.group_tokens());
    const double e_chain = worst_error(chain<float>(U, opt, group), ref);
    // The GPU forward's chain: the pair carried over 8 groups (128 segments) between solves.
    const double e_span = worst_error(chain<float>(U, opt, group, 8), ref);
    const double e_rec = worst_error(tracker_starts<float>(U, opt, PenaltyChainShape{T, opt.refresh_period, group}.group_tokens()), ref);
    INFO("skew " << skew << ": chain " << e_chain << ", with span 8 " << e_span << ", recurrence " << e_rec);
    CHECK(e_chain <= e_rec);
    CHECK(e_span <= e_rec);
    CHECK(e_chain <= 1e-5);  // a few hundred float roundings of O(1) entries; cond(A) ~ 30-60 here
    CHECK(e_span <= 1e-5);
  }
}

TEST_CASE("penalty chain refuses a malformed shape, naming the parameter", "[chunked][vla][penalty-chain]") {
  const Mat<double> U = penalty_directions(10, 4, 1);
  CHECK_THROWS_WITH(penalty_chain<double>(U, PenaltyChainShape{10, 20, 0}, 0.1, 1e-3), Catch::Contains("group"));
  CHECK_THROWS_WITH(penalty_chain<double>(U, PenaltyChainShape{10, -1, 4}, 0.1, 1e-3), Catch::Contains("refresh_period"));
  CHECK_THROWS_WITH(penalty_chain<double>(U, PenaltyChainShape{10, 20, 4, 0}, 0.1, 1e-3), Catch::Contains("span"));
  CHECK_THROWS_WITH(penalty_chain<double>(U, PenaltyChainShape{11, 20, 4}, 0.1, 1e-3), Catch::Contains("U: expected T = 11"));
}
