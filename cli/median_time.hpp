#pragma once
// Wall-clock timing for the CPU-side benchmarks (`vla bench chunked-vla`, `vla bench data-parallel`, whose
// step waits for its GPUs): one untimed warm-up call (allocations, caches, plans), then the median of
// `reps` timed calls, in seconds.
#include <algorithm>
#include <chrono>
#include <vector>

namespace vla::cli {

template <class F> double median_seconds(int reps, F&& f) {
  std::vector<double> t;
  f();
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace vla::cli
