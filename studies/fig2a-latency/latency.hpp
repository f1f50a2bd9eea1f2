#pragma once
// Forward latency of one mixer layer vs sequence length, the measurement behind Fig. 2(a) and Fig. 3
// (Sec. 5.3, 6.1): on the CPU here (core/layers/mixer_layer.hpp in float, the paper's layer: d = 128,
// H = 4, d_h = 32, one sequence), cached in the run store so the two studies share one measurement; on
// the GPU from `vla bench attention --csv` (the fused kernels and the toolkit's softmax, fp32).
#include "studies/study.hpp"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace vla::studies {

struct LatencyConfig {
  std::vector<std::string> mixers{"softmax", "linear", "deltanet", "vla"};
  std::vector<int> T{128, 256, 512, 1024, 2048};  // Sec. 5.3
  int batch = 1, heads = 4, d_head = 32, d_model = 128;
  int reps = 3;                                    // median of reps timed forwards after one warm-up
  std::string precision = "float";
};
LatencyConfig latency_config(const StudyOptions& o);  // quick: T 64..256, one rep

struct Latency {
  std::vector<int> T;
  std::map<std::string, std::vector<double>> ms;  // mixer -> milliseconds per forward, one per T
  std::string where;                              // the device and shape, for the report
  std::string file;                               // where the numbers are (store cache or bench CSV)
};

// The CPU timings at latency_config(ctx.opt), measured once per git revision and host (store cache).
Latency cpu_latency(const StudyContext& ctx);
// The GPU timings written by `vla bench attention --csv` (B = 8, H = 4, d = 32), if the file exists:
// <out>/gpu-bench/latency-8-4-32.csv (studies/run-gpu.sh), else the device check's <out>/gpu-bench/bench-8-4-32.csv.
std::optional<Latency> gpu_latency(const StudyContext& ctx);

// Per-T rows for tables and plots: T, then f(mixer, i) for each mixer.
std::vector<std::vector<double>> per_T_rows(const Latency& l, const std::vector<std::string>& mixers,
                                            const std::function<double(const std::string&, std::size_t)>& f);
// The rows as a table (T, one column per mixer, values printed by `cell`).
TextTable per_T_table(const std::string& name, const std::string& caption, const std::vector<std::string>& mixers,
                      const std::vector<std::vector<double>>& rows, const std::function<std::string(double)>& cell);

// Least-squares slope of log(ms) against log(T) over points [from, T.size()).
double loglog_slope(const std::vector<int>& T, const std::vector<double>& ms, std::size_t from = 0);
// The T where `ours` drops below `theirs`, log-log interpolated between measured points; NaN if never.
double crossover(const std::vector<int>& T, const std::vector<double>& ours, const std::vector<double>& theirs);

}  // namespace vla::studies
