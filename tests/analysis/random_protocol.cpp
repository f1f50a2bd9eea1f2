// The Sec. 6.2 random-input protocol (analysis/random_protocol.hpp) has one run,
// protocol_trajectories (the single-head layer in any precision), behind the ledger's norm analysis
// (analysis/norms.hpp, double) and the Fig. 4 study (studies/fig4); the analyses that drive a rule
// directly see the protocol through the head stream (projections in double, analysis/head_stream.hpp).
// All must measure the same trajectories, and bad settings must be refused naming the command-line option.
#include "analysis/head_stream.hpp"
#include "analysis/norms.hpp"
#include "analysis/random_protocol.hpp"
#include "analysis/rule_zoo.hpp"
#include "studies/fig4/stability.hpp"

#include <catch2/catch.hpp>

#include <cmath>

using namespace vla;
using namespace vla::analysis;

namespace {
// A short run of the protocol: T = 60, d = 6, two seeds, the three rules of Fig. 4.
RandomProtocol small_protocol() {
  RandomProtocol p;
  p.T = 60;
  p.d_head = 6;
  p.seeds = {3, 4};
  p.mixers = {"linear", "deltanet", "vla"};
  return p;
}
}  // namespace

TEST_CASE("random protocol: the layer run and the head stream see the same inputs", "[analysis]") {
  const RandomProtocol n = small_protocol();
  const auto runs = protocol_trajectories(n, "double");
  REQUIRE(runs.size() == n.mixers.size());
  // Both compute in double from the same weights and x_t; only the projections' summation order may
  // differ (W x_t + b per token in the layer, one W X product in the head stream): a few u per entry,
  // which 60 steps of d = 6 can grow at most ~T d-fold, ~1e-13. 1e-12 covers that and is far below
  // what other weights or inputs change (O(1) relative). Measured: 0 (linear, VLA), 2e-16 (DeltaNet).
  for (std::size_t m = 0; m < n.mixers.size(); ++m)
    for (std::size_t k = 0; k < n.seeds.size(); ++k) {
      std::vector<double> S, A;  // (T) along the head stream
      const HeadStream stream = random_head_stream(n.d_head, n.T, n.seeds[k]);
      with_analysis_rule<Precision<double>>(n.mixers[m], n.base, [&](auto rule) {
        drive(rule, stream, [&](int, auto&, auto&, const StepRecord<double>& rec) {
          S.push_back(rec.stats[0].S_fro);
          A.push_back(rec.stats[0].A_fro);
        });
      });
      REQUIRE(runs[m][k].size() == std::size_t(n.T));
      REQUIRE(S.size() == std::size_t(n.T));
      double worst = 0;
      for (int t = 0; t < n.T; ++t) {
        const auto& st = runs[m][k][t];
        worst = std::max(worst, std::abs(st.S_fro - S[t]) / S[t]);
        if (n.mixers[m] == "vla") worst = std::max(worst, std::abs(st.A_fro - A[t]) / A[t]);
      }
      INFO(n.mixers[m] << " seed " << n.seeds[k] << ": max relative difference " << worst);
      CHECK(worst <= 1e-12);
    }
}

TEST_CASE("random protocol: the norm analysis is the Fig. 4 study in double, bit for bit", "[analysis]") {
  const NormConfig n{small_protocol()};
  const studies::StabilityConfig s{small_protocol(), "double"};
  const auto rn = run_norms(n);
  const auto rs = studies::run_stability(s);
  REQUIRE(rs.trajectories.size() == n.mixers.size());
  for (std::size_t m = 0; m < n.mixers.size(); ++m)
    for (std::size_t k = 0; k < n.seeds.size(); ++k) {
      const auto& series = rn.series[m * n.seeds.size() + k];
      REQUIRE(series.mixer == n.mixers[m]);
      REQUIRE(rs.trajectories[m][k].size() == series.S.size());
      for (int t = 0; t < n.T; ++t) {
        const auto& st = rs.trajectories[m][k][t];
        CHECK(st.S_fro == series.S[t]);
        if (n.mixers[m] == "vla") CHECK(st.A_fro == series.A[t]);
      }
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
  CHECK_THROWS_WITH(protocol_trajectories(RandomProtocol{}, "fp8"), Catch::Contains("--precision"));
}
