// VLA (Algorithm 1) over a long stream in double: T tokens through one head, d_h = 32, on the
// Sec. 6.2 random-input protocol, with constant memory and no non-finite value anywhere. The slow
// test runs T = 10^6 (beyond CI's budget: `make test-slow`); the fast one runs the same code at
// T = 2 10^4 so that CI exercises it.
//
// Constant memory by construction: the loop holds the rule's state (S and A: d x d, z: d), one
// token's projections and the weights; the inputs are drawn one token at a time, never stored. Only
// the norm table grows, by one row per 10^4 tokens (100 rows at T = 10^6). The test also measures
// it: the memory in use may not grow between t = T/10 and t = T. That is the process's peak
// resident set, except under AddressSanitizer, whose quarantine keeps freed blocks resident (the
// peak grows by ~160 MiB over 2 10^4 tokens with no leak); there it is the live heap, as the
// sanitizer's allocator counts it.
#include "analysis/random_protocol.hpp"
#include "core/io/csv.hpp"
#include "core/rules/registry.hpp"
#include "tests/build_paths.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#if defined(__SANITIZE_ADDRESS__)
#define VLA_LONG_RUN_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VLA_LONG_RUN_UNDER_ASAN 1
#endif
#endif
#ifdef VLA_LONG_RUN_UNDER_ASAN
// The sanitizer runtime's count of live heap bytes (declared here: GCC installs no
// <sanitizer/allocator_interface.h>, clang does, with this declaration).
extern "C" std::size_t __sanitizer_get_current_allocated_bytes();
#endif

#include <chrono>
#include <fstream>
#include <iostream>
#include <random>
#include <string>

using namespace vla;
namespace fs = std::filesystem;

namespace {

constexpr int kDHead = 32;
constexpr std::uint64_t kSeed = 42;  // the protocol's first seed
constexpr int kNormEvery = 10'000;

// The protocol's inputs (analysis/random_protocol.hpp protocol_inputs: x_t ~ N(0, I) drawn from
// seed + 1 in row order) one token at a time, from the same generator and distribution object, so
// token t is row t-1 of protocol_inputs(T, d, seed) for every T, without the (T, d) matrix.
class ProtocolInputStream {
 public:
  ProtocolInputStream(int d, std::uint64_t seed) : d_(d), gen_(seed + 1) {}
  Vec<double> next() {
    Vec<double> x(d_);
    for (int i = 0; i < d_; ++i) x(i) = normal_(gen_);
    return x;
  }

 private:
  int d_;
  std::mt19937_64 gen_;
  std::normal_distribution<double> normal_{0.0, 1.0};
};

// The memory the constant-memory check compares, in KiB: the process's peak resident set (VmHWM),
// or under AddressSanitizer the live heap (see the file comment).
#ifdef VLA_LONG_RUN_UNDER_ASAN
constexpr const char* kMemoryMeasure = "live heap (AddressSanitizer's count)";
long memory_kib() { return long(__sanitizer_get_current_allocated_bytes() / 1024); }
#else
constexpr const char* kMemoryMeasure = "peak RSS";
long memory_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}
#endif

struct LongRun {
  int steps_done = 0;
  int first_non_finite = 0;  // the step (1-based) where a non-finite value first appeared; 0: none
  std::string non_finite_what;
  double S_fro = 0, A_fro = 0, max_S_fro = 0, max_A_fro = 0;
  long mem_tenth_kib = 0, mem_end_kib = 0;
  double seconds = 0;
};

// Streams T protocol tokens through the core rule `vla` (rule.init / rule.step, batch of one, in
// double) with the protocol's weights: q = W_q x, k = W_k x, v = W_v x, u = W_u k (zero biases), as
// analysis/head_stream.cpp projects them. Checks S, A, z and o for non-finite values after every
// step; writes t, ||S_t||_F, ||A_t||_F every 10^4 steps to `csv` (rewritten atomically each time, so
// the file is complete up to the last row at any moment).
template <class P> void stream(const VlaRule<P>& rule, int T, const fs::path& csv, LongRun& r) {
  const auto w = analysis::protocol_weights<double>(kDHead, kSeed);
  ProtocolInputStream inputs(kDHead, kSeed);
  auto state = rule.init(1, kDHead);
  HeadInputs<double> in;
  Mat<double> out;
  StepRecord<double> rec;
  io::CsvTable norms({"t", "S_fro", "A_fro"});
  for (int t = 1; t <= T; ++t) {
    const Vec<double> x = inputs.next();
    in.q = w.Wq * x;
    in.k = w.Wk * x;
    in.v = w.Wv * x;
    in.u = w.Wu * in.k;
    rule.step(state, in, out, &rec);
    r.steps_done = t;
    const StepStats& s = rec.stats[0];
    const char* bad = !all_finite(state.memory.S(0))   ? "S_t"
                      : !all_finite(state.tracker.A(0)) ? "A_t"
                      : !all_finite(state.z[0])         ? "z_t"
                      : !all_finite(out)                ? "o_t"
                      : !std::isfinite(s.S_fro) || !std::isfinite(s.A_fro) ? "a state norm"
                                                                           : nullptr;
    if (bad) {
      r.first_non_finite = t;
      r.non_finite_what = bad;
      return;
    }
    r.S_fro = s.S_fro;
    r.A_fro = s.A_fro;
    r.max_S_fro = std::max(r.max_S_fro, s.S_fro);
    r.max_A_fro = std::max(r.max_A_fro, s.A_fro);
    if (t % kNormEvery == 0) {
      norms.add_row({double(t), s.S_fro, s.A_fro});
      norms.write(csv);
    }
    if (t == T / 10) r.mem_tenth_kib = memory_kib();
  }
}

LongRun stream_vla(int T, const fs::path& csv) {
  using P = Precision<double>;
  LongRun r;
  const auto start = std::chrono::steady_clock::now();
  MixerConfig mc;
  mc.mixer = "vla";
  with_rule<P>(mc, [&](auto rule) {
    // with_rule instantiates this for every rule; the loop reads VLA's own state (S, A, z).
    if constexpr (std::is_same_v<decltype(rule), VlaRule<P>>) stream(rule, T, csv, r);
    else FAIL("with_rule gave another rule for 'vla'");
  });
  r.mem_end_kib = memory_kib();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

void check_long_run(int T) {
  const fs::path csv = vla::test::binary_dir() / "reliability" / fmt::format("vla_long_run_T{}.csv", T);
  const LongRun r = stream_vla(T, csv);
  std::cout << fmt::format(
      "VLA long run, double, d_h = {}, seed {}: T = {} in {:.1f} s; final ||S_T||_F = {:.6g}, ||A_T||_F = {:.6g} "
      "(max over t {:.6g}, {:.6g}); {} {} KiB at t = T/10, {} KiB at t = T; norms every {} steps in {}\n",
      kDHead, kSeed, T, r.seconds, r.S_fro, r.A_fro, r.max_S_fro, r.max_A_fro, kMemoryMeasure, r.mem_tenth_kib,
      r.mem_end_kib, kNormEvery, csv.string());
  {
    INFO(fmt::format("first non-finite value: {} at step {}", r.non_finite_what, r.first_non_finite));
    CHECK(r.first_non_finite == 0);
  }
  CHECK(r.steps_done == T);
  // Constant memory: anything kept per token (one double per token is 7 MB over 9 10^5 tokens at
  // T = 10^6) would raise the peak by more than the 1 MiB allowed for allocator noise.
  INFO(kMemoryMeasure);
  REQUIRE(r.mem_tenth_kib > 0);
  CHECK(r.mem_end_kib - r.mem_tenth_kib <= 1024);
  // The norm table: one row per 10^4 steps, the last at t = T.
  std::ifstream in(csv);
  std::string line, last;
  int rows = -1;  // the header
  while (std::getline(in, line)) { ++rows; last = line; }
  CHECK(rows == T / kNormEvery);
  CHECK(last.rfind(fmt::format("{},", T), 0) == 0);
}

}  // namespace

TEST_CASE("the protocol input stream is protocol_inputs drawn one token at a time", "[vla][long-run]") {
  // If this fails, the long run would not be on the Sec. 6.2 protocol it claims.
  const Mat<double> X = analysis::protocol_inputs(1000, kDHead, kSeed);
  ProtocolInputStream s(kDHead, kSeed);
  for (int t = 0; t < X.rows(); ++t) REQUIRE(s.next() == X.row(t).transpose());
}

TEST_CASE("VLA streams 2 10^4 tokens in double: finite, constant memory, norms every 10^4", "[vla][long-run]") {
  // If this fails, the long run below fails for the same reason, sooner.
  check_long_run(20'000);
}

TEST_CASE("VLA streams 10^6 tokens in double: finite, constant memory, norms every 10^4", "[vla][long-run][slow]") {
  // If this fails, Algorithm 1 in double does not survive a long stream (a non-finite state, output
  // or norm, reported with its step), or the streaming path keeps memory per token.
  check_long_run(1'000'000);
}
