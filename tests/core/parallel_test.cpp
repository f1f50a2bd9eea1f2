// The splitting layer (core/parallel/): the deal, the rank -> GPU choice, the launcher detection, the
// byte encoding, and for_each_share / gather_units over ranks that are threads (tests/core/thread_group.hpp).
#include "core/parallel/bytes.hpp"
#include "core/parallel/group.hpp"
#include "tests/core/thread_group.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>

using namespace vla;
using namespace vla::parallel;

// A failure means a unit is run twice or never, or a rerun deals the same unit to another rank (which
// would not find the checkpoint its first owner left).
TEST_CASE("share_of deals unit i to rank i mod size, every unit once", "[parallel]") {
  for (int size : {1, 2, 3, 8})
    for (std::size_t n : {0u, 1u, 7u, 16u}) {
      std::multiset<std::size_t> all;
      for (int r = 0; r < size; ++r)
        for (std::size_t u : share_of(n, r, size)) {
          CHECK(int(u % std::size_t(size)) == r);
          all.insert(u);
        }
      CHECK(all.size() == n);
      for (std::size_t u = 0; u < n; ++u) CHECK(all.count(u) == 1);
    }
  CHECK(share_of(7, 1, 3) == std::vector<std::size_t>{1, 4});
  CHECK_THROWS_AS(share_of(4, 2, 2), std::invalid_argument);
}

// A failure means two ranks of a host train on one GPU while another idles, or a rank escapes the GPUs
// the launcher gave the job (CUDA_VISIBLE_DEVICES).
TEST_CASE("gpu_for_local_rank: one GPU per local rank, within CUDA_VISIBLE_DEVICES", "[parallel]") {
  CHECK(gpu_for_local_rank(0, "", 8) == "0");
  CHECK(gpu_for_local_rank(7, "", 8) == "7");
  CHECK(gpu_for_local_rank(9, "", 8) == "1");  // more ranks than GPUs: shared round-robin
  CHECK(gpu_for_local_rank(3, "", 0) == "");   // no GPU: a CPU rank, the variable left alone
  CHECK(gpu_for_local_rank(0, "4,5,6", 8) == "4");
  CHECK(gpu_for_local_rank(2, "4,5,6", 8) == "6");
  CHECK(gpu_for_local_rank(4, "4,5,6", 8) == "5");
  CHECK(gpu_for_local_rank(1, "GPU-a1b2", 8) == "GPU-a1b2");  // one device given (srun --gpus-per-task): kept
  CHECK_THROWS_AS(gpu_for_local_rank(-1, "", 2), std::invalid_argument);
}

// A failure means `vla` initialises MPI outside a launcher (a plain run must stay as it is) or misses one.
TEST_CASE("launched_by_mpi reads the launchers' variables only", "[parallel]") {
  auto env_with = [](std::map<std::string, std::string> vars) {
    return [vars](const char* k) -> const char* {
      const auto it = vars.find(k);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  };
  CHECK(!launched_by_mpi(env_with({})));
  CHECK(!launched_by_mpi(env_with({{"OMPI_MCA_btl", "self"}, {"SLURM_PROCID", "0"}})));
  CHECK(launched_by_mpi(env_with({{"OMPI_COMM_WORLD_SIZE", "2"}})));
  CHECK(launched_by_mpi(env_with({{"PMI_SIZE", "4"}})));
  CHECK(launched_by_mpi(env_with({{"PMIX_RANK", "0"}})));
  CHECK(world().size() == 1);  // no Session here: a group of one
  CHECK_NOTHROW(require_one_process("x"));
}

// A failure means a result changes on its way between ranks (the root's files would then depend on the
// number of ranks) or a truncated message is read as a valid one.
TEST_CASE("ByteWriter / ByteReader round-trip bit for bit and refuse short or long messages", "[parallel]") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> v{0.1, -0.0, nan, inf, -inf, 5e-324, std::nextafter(1.0, 2.0)};
  const std::string bin("a\0b\xff", 4);
  const std::string b = ByteWriter().u64(42).i64(-7).f64(1.0 / 3).str(bin).f64s(v).str("").take();
  ByteReader in(b);
  CHECK(in.u64() == 42);
  CHECK(in.i64() == -7);
  CHECK(in.f64() == 1.0 / 3);
  CHECK(in.str() == bin);
  const auto w = in.f64s();
  REQUIRE(w.size() == v.size());
  CHECK(std::memcmp(w.data(), v.data(), v.size() * sizeof(double)) == 0);
  CHECK(in.str().empty());
  CHECK_NOTHROW(in.end());
  const std::string cut = b.substr(0, b.size() - 12);
  ByteReader short_in(cut);
  short_in.u64(), short_in.i64(), short_in.f64(), short_in.str();
  CHECK_THROWS_AS(short_in.f64s(), std::runtime_error);
  const std::string longer = b + "x";
  ByteReader long_in(longer);
  long_in.u64(), long_in.i64(), long_in.f64(), long_in.str(), long_in.f64s(), long_in.str();
  CHECK_THROWS_AS(long_in.end(), std::runtime_error);
}

// A failure means a unit is computed by a rank it was not dealt to, twice, or lands in the wrong slot at
// the root; or the other ranks get results they should not hold.
TEST_CASE("gather_units: each rank computes its share, the root gets every result in unit order", "[parallel]") {
  for (int size : {1, 3}) {
    const std::size_t n = 7;
    std::vector<std::atomic<int>> computed_by(n);
    for (auto& c : computed_by) c = -1;
    std::atomic<int> twice{0}, non_root_results{0};
    std::vector<std::string> at_root;
    // Catch2's assertions are not thread-safe: the ranks record, the test thread checks.
    vla::test::run_ranks(size, [&](Group& g) {
      auto r = gather_units(g, n, [&](std::size_t u) {
        twice += computed_by[u].exchange(g.rank()) != -1;
        return "unit " + std::to_string(u);
      });
      if (g.root()) at_root = std::move(r);
      else non_root_results += int(r.size());
    });
    CHECK(twice == 0);
    CHECK(non_root_results == 0);
    REQUIRE(at_root.size() == n);
    for (std::size_t u = 0; u < n; ++u) {
      CHECK(at_root[u] == "unit " + std::to_string(u));
      CHECK(computed_by[u] == int(u % std::size_t(size)));
    }
  }
}

// A failure means the costliest units are not dealt first (one rank gets every expensive unit), or the
// results come back in the deal's order instead of the units'.
TEST_CASE("gather_units with a cost: dealt largest first, returned in unit order", "[parallel]") {
  const std::vector<double> cost{1, 8, 2, 8, 4, 1};  // the deal: units 1, 3, 4, 2, 0, 5
  std::vector<std::atomic<int>> computed_by(cost.size());
  std::vector<std::string> at_root;
  vla::test::run_ranks(2, [&](Group& g) {
    auto r = gather_units(
        g, cost.size(),
        [&](std::size_t u) {
          computed_by[u] = g.rank();
          return std::to_string(u);
        },
        [&](std::size_t u) { return cost[u]; });
    if (g.root()) at_root = std::move(r);
  });
  REQUIRE(at_root.size() == cost.size());
  for (std::size_t u = 0; u < cost.size(); ++u) CHECK(at_root[u] == std::to_string(u));
  // Round-robin over 1, 3, 4, 2, 0, 5: rank 0 gets 1, 4, 0 and rank 1 gets 3, 2, 5 (one of each 8).
  CHECK(computed_by[1] == 0);
  CHECK(computed_by[3] == 1);
  CHECK(computed_by[4] == 0);
  CHECK(computed_by[2] == 1);
  CHECK(computed_by[0] == 0);
  CHECK(computed_by[5] == 1);
}

// A failure means results reach the root only when a rank's whole share is done, so a rank that dies
// would lose the units it had finished.
TEST_CASE("for_each_share: a result reaches the root while its rank is still working", "[parallel]") {
  std::atomic<bool> taken{false}, seen_before_return{false};
  std::vector<std::size_t> share1;
  std::string got;
  int got_unit = -1, got_from = -1;
  vla::test::run_ranks(2, [&](Group& g) {
    for_each_share(
        g, 2,
        [&](const std::vector<std::size_t>& share, const Emit& emit) {
          if (g.rank() != 1) return;
          share1 = share;
          emit(1, "first");
          const auto t0 = std::chrono::steady_clock::now();
          while (!taken && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20))
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          seen_before_return = taken.load();
        },
        [&](std::size_t u, int from, std::string b) {
          got_unit = int(u);
          got_from = from;
          got = std::move(b);
          taken = true;
        });
  });
  CHECK(share1 == std::vector<std::size_t>{1});
  CHECK(got_unit == 1);
  CHECK(got_from == 1);
  CHECK(got == "first");
  CHECK(seen_before_return);
}
