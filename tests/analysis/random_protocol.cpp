// The Sec. 6.2 random-input protocol (analysis/random_protocol.hpp) has two users that run it through
// different code: the ledger's norm analysis (HeadStream projections in double, analysis/norms.hpp)
// and the Fig. 4 study (MixerLayer in the requested precision, studies/fig4). They must measure the
// same trajectories, and bad settings must be refused naming the command-line option.
#include "analysis/norms.hpp"
#include "analysis/random_protocol.hpp"
#include "studies/fig4/stability.hpp"

#include <catch2/catch.hpp>

#include <cmath>

using namespace vla;
using namespace vla::analysis;

TEST_CASE("random protocol: the norm analysis and the Fig. 4 study see the same inputs", "[analysis]") {
  NormConfig n;
  n.T = 60;
  n.d_head = 6;
  n.seeds = {3, 4};
  n.mixers = {"linear", "deltanet", "vla"};
  studies::StabilityConfig s;
  static_cast<RandomProtocol&>(s) = n;
  const auto rn = run_norms(n);
  const auto rs = studies::run_stability(s);
  REQUIRE(rs.trajectories.size() == n.mixers.size());
  // Both compute in double from the same weights and x_t; only the projections' summation order may
  // differ (W x_t + b per token in the layer, one W X product in the head stream): a few u per entry,
  // which 60 steps of d = 6 can grow at most ~T d-fold, ~1e-13. 1e-12 covers that and is far below
  // what other weights or inputs change (O(1) relative). Measured: 0 (linear, VLA), 2e-16 (DeltaNet).
  for (std::size_t m = 0; m < n.mixers.size(); ++m)
    for (std::size_t k = 0; k < n.seeds.size(); ++k) {
      const auto& series = rn.series[m * n.seeds.size() + k];
      REQUIRE(series.mixer == n.mixers[m]);
      double worst = 0;
      for (int t = 0; t < n.T; ++t) {
        const auto& st = rs.trajectories[m][k][t];
        worst = std::max(worst, std::abs(st.S_fro - series.S[t]) / series.S[t]);
        if (n.mixers[m] == "vla") worst = std::max(worst, std::abs(st.A_fro - series.A[t]) / series.A[t]);
      }
      INFO(n.mixers[m] << " seed " << n.seeds[k] << ": max relative difference " << worst);
      CHECK(worst <= 1e-12);
    }
}

TEST_CASE("random protocol: bad settings name the option", "[analysis]") {
  auto refused = [](auto edit, const char* option) {
    RandomProtocol p;
    edit(p);
    CHECK_THROWS_WITH(p.validate(), Catch::Contains(option));
  };
  refused([](RandomProtocol& p) { p.T = 0; }, "--T");
  refused([](RandomProtocol& p) { p.d_head = 0; }, "--d-head");
  refused([](RandomProtocol& p) { p.seeds.clear(); }, "--seeds");
  refused([](RandomProtocol& p) { p.mixers.clear(); }, "--mixers");
  refused([](RandomProtocol& p) { p.mixers = {"softmax"}; }, "softmax");
  refused([](RandomProtocol& p) { p.mixers = {"vla", "linear", "vla"}; }, "'vla' given twice");
  refused([](RandomProtocol& p) { p.base.penalty.lambda0 = 0; }, "lambda0");
  CHECK_NOTHROW(RandomProtocol{}.validate());
}
