// The report's chunked VLA benchmark section (studies/report.hpp, chunked_vla_section): fla's columns come
// from the same call when gpu/bench_torch.py ran fla (--fla), and from the anchor table otherwise. If this
// fails, the report would compare the chunked form with numbers from another call (or none) while saying
// they are this call's, or the ratios would be taken against the wrong column.
#include "studies/report.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;

namespace {

struct Dir {
  fs::path path = fs::temp_directory_path() / ("vla_chunked_section_" + std::to_string(::getpid()));
  Dir() { fs::create_directories(path / "gpu-bench"); }
  ~Dir() { fs::remove_all(path); }
  void csv(const std::string& text) const { std::ofstream(path / "gpu-bench" / "chunked-vla-8-4-32.csv") << text; }
};

}  // namespace

TEST_CASE("chunked VLA report section: fla from the same call replaces the anchors, and says so", "[studies][report]") {
  const Dir d;
  // 4096 and 16384 carry fla's times from this call; 8192 has none (nan), and no anchor exists there either.
  d.csv("B,H,d,T,vla_ms,vla_chunked_ms,vla_fwdbwd_ms,vla_chunked_fwdbwd_ms,sdpa_bf16_ms,sdpa_bf16_fwdbwd_ms,fla_chunk_delta_bf16_ms,"
        "fla_chunk_delta_bf16_fwdbwd_ms,fla_chunk_iplr_fp32_ms\n"
        "8,4,32,4096,4.0,2.0,40.0,8.0,0.5,4.0,1.0,2.0,1.6\n8,4,32,8192,8.0,4.0,80.0,16.0,nan,nan,nan,nan,nan\n"
        "8,4,32,16384,16.0,3.0,160.0,9.0,2.0,8.0,0.75,4.5,4.0\n");
  const std::string m = vla::studies::chunked_vla_section(d.path);
  INFO(m);
  CHECK(m.find("fla chunk delta bf16 (this call)") != std::string::npos);
  CHECK(m.find("fla chunk delta bf16 fwd+bwd (this call)") != std::string::npos);
  CHECK(m.find("(anchor)") == std::string::npos);
  // Forward: chunked / fla = 2.0 / 1.0 and 3.0 / 0.75 (the anchor at 16384 would have given 3.0 / 0.812 = 3.69).
  CHECK(m.find("| 4096 | 4.00 | 2.000 | 2.00 | 0.5 | 4.00 | 1 | 2.00 |") != std::string::npos);
  CHECK(m.find("| 16384 | 16.00 | 3.000 | 5.33 | 2 | 1.50 | 0.75 | 4.00 |") != std::string::npos);
  CHECK(m.find("| 8192 | 8.00 | 4.000 | 2.00 |  |  |  |  |") != std::string::npos);
  // fla's IPLR kernel from the same call: 2.0 / 1.6 and 3.0 / 4.0; none at 8192.
  CHECK(m.find("| 4096 | 1.6 | 1.25 |") != std::string::npos);
  CHECK(m.find("| 16384 | 4 | 0.75 |") != std::string::npos);
  CHECK(m.find("| 8192 |  |  |\n") != std::string::npos);
  // Forward + backward: 8.0 / 2.0 and 9.0 / 4.5.
  CHECK(m.find("| 4096 | 40.00 | 8.00 | 5.00 | 4 | 2.00 | 2 | 4.00 |") != std::string::npos);
  CHECK(m.find("| 16384 | 160.00 | 9.00 | 17.78 | 8 | 1.12 | 4.5 | 2.00 |") != std::string::npos);
}

TEST_CASE("chunked VLA report section: without fla in the call, the anchors, labelled as such", "[studies][report]") {
  const Dir d;
  d.csv("B,H,d,T,vla_ms,vla_chunked_ms\n8,4,32,16384,16.0,3.0\n");
  const std::string m = vla::studies::chunked_vla_section(d.path);
  INFO(m);
  CHECK(m.find("fla chunk delta bf16 (anchor)") != std::string::npos);
  CHECK(m.find("| 16384 | 16.00 | 3.000 | 5.33 |  |  | 0.812 | 3.69 |") != std::string::npos);  // the anchor's 0.812 ms
  CHECK(m.find("IPLR") == std::string::npos);  // no anchor stands in for a kernel this call did not run
  CHECK(vla::studies::chunked_vla_section(d.path / "missing").empty());
}
