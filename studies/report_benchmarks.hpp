#pragma once
// The report's sections on the GPU benchmarks (`vla report` puts them after the summary), each read from the
// files a device call left under out_dir/gpu-bench/ and empty where they are missing. Every ratio and target
// verdict is computed here from those tables.
#include <filesystem>
#include <string>

namespace vla::studies {

// Scale-out: gpu-bench/data-parallel.{csv,log} (`vla bench data-parallel`, gpu/multi-gpu-check.sh) as a table,
// the devices from the bench's log.
std::string data_parallel_section(const std::filesystem::path& out_dir);

// The chunked VLA (docs/chunkwise-vla-gpu.md): gpu-bench/chunked-vla-8-4-32.{csv,log}, forward and forward +
// backward against the fused kernel, flash softmax and fla's chunked delta rule (this call's times where the CSV
// has fla's columns, the fastest of them and gpu-bench/fla-calls.csv's calls on the same card where that record
// is there, else the anchors), with the ratios and the chunked VLA's targets (docs/chunkwise-vla-gpu.md) as
// met / not met / not measured. Throws where fla-calls.csv lacks its device column.
std::string chunked_vla_section(const std::filesystem::path& out_dir);

// One benchmark target (a bound on a measured value) as a Markdown list line: met, not met, or not measured
// where the value is NaN (the column or the T missing).
std::string target_line(const std::string& what, double value, double bound, const char* unit);

}  // namespace vla::studies
