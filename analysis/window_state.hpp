#pragma once
// Seed 003 sec. 4.4, "Exact streaming state" (and Algorithm 3's boundary note): for FALCON-3 and FALCON-3A
// the matrix state S_t alone is not Markov; exact continuation across a segment boundary needs the last
// B - 1 causal pairs besides S_t (core/rules/sliding_window.hpp). Measured on the rules themselves, in
// mp50: a stream of T tokens run in one go, against the same stream cut after T1 tokens and continued from
// a fresh state holding S_{T1} and the newest p pairs of the window, for p = B - 1 (the paper's payload),
// p = B - 2 (one pair short) and p = 0 (S alone).
#include <cstdint>
#include <string>

namespace vla::analysis {

struct WindowContinuation {
  std::string rule;                  // falcon3 | falcon3a
  int B = 0;                         // the window
  double with_payload = 0;           // ||O_continued - O_one_go|| / ||O_one_go|| over tokens T1+1..T, p = B - 1
  double one_pair_short = 0;         // the same with p = B - 2 (NaN for B = 1)
  double state_alone = 0;            // p = 0
};

// d x T random inputs (seed), the default knobs but window B, cut after T1 tokens (B <= T1 < T).
WindowContinuation window_continuation(const std::string& rule, int B, int d, int T, int T1, std::uint64_t seed);

}  // namespace vla::analysis
