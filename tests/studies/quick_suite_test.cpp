// Every study in --quick mode on the CPU, through the built `vla` (so no study rots): each must write
// its section, its computed verdict, its data and its plots; a second run trains nothing; `vla report`
// gathers them and the ledger's training claims read the verdicts, labelled quick. docs/studies.md has the measured time of this test.
#include "studies/outputs.hpp"
#include "studies/study.hpp"
#include "tests/build_paths.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

struct Scratch {
  fs::path path = fs::temp_directory_path() / ("vla_quick_suite_" + std::to_string(::getpid()));
  Scratch() { fs::remove_all(path); }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::pair<int, std::string> run(const std::string& cmd, const fs::path& log) {
  const int status = std::system((cmd + " > '" + log.string() + "' 2>&1").c_str());
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ss.str()};
}

std::string text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("every study runs in --quick mode and writes its files and a computed verdict", "[studies][quick-suite]") {
  Scratch s;
  const std::string vla = (vla::test::binary_dir() / "bin" / "vla").string();
  const auto [rc, out] = run(vla + " study run all --quick --threads 2 --out " + s.path.string(), s.path.string() + ".log");
  INFO(out);
  REQUIRE(rc == 0);
  const std::set<std::string> verdicts{"holds", "fails", "partial", "not-run"};
  for (const auto& st : vla::studies::study_registry()) {
    INFO(st.id);
    const fs::path d = s.path / st.id;
    REQUIRE(fs::exists(d / "section.md"));
    REQUIRE(fs::exists(d / "verdict.json"));
    REQUIRE(fs::exists(d / "data" / "study.json"));
    REQUIRE(fs::exists(d / "data" / "comparison.csv"));
    const auto v = vla::studies::read_json(d / "verdict.json");
    CHECK(v.at("study") == st.id);
    CHECK(verdicts.count(v.at("verdict").get<std::string>()) == 1);
    CHECK(v.at("quick") == st.sized);
    // The verdict is computed from the comparisons it lists: held/total agree with them.
    int held = 0, total = 0;
    for (const auto& c : v.at("comparisons"))
      if (!c.at("info").get<bool>()) { ++total; held += c.at("holds").get<bool>(); }
    CHECK(v.at("held") == held);
    CHECK(v.at("total") == total);
    const std::string verdict = v.at("verdict");
    if (total == 0) CHECK(verdict == "not-run");
    else if (held == total) CHECK(verdict == "holds");
    else if (held == 0) CHECK(verdict == "fails");
    else CHECK(verdict == "partial");
    const std::string md = text(d / "section.md");
    CHECK(md.find("**Verdict: " + verdict) != std::string::npos);
    if (st.sized) CHECK(md.find("NOT the paper-size result") != std::string::npos);
    for (const auto& e : fs::directory_iterator(d / "plots"))  // every plot: its data and script beside it
      if (e.path().extension() == ".png") {
        CHECK(fs::exists(fs::path(e.path()).replace_extension(".csv")));
        CHECK(fs::exists(fs::path(e.path()).replace_extension(".gp")));
      }
  }
  // Nothing is trained twice: the same command again finds every run in the store, and the sections say so
  // instead of timing a sweep that trained nothing (which a reader would take for the study's cost).
  const std::string trained_md = text(s.path / "fig5-mqar-capacity" / "section.md");
  CHECK(trained_md.find("the sweep that trained them") != std::string::npos);
  const auto [rc2, out2] = run(vla + " study run all --quick --threads 2 --out " + s.path.string(), s.path.string() + ".log");
  INFO(out2);
  REQUIRE(rc2 == 0);
  CHECK(out2.find(": 0 runs trained, 0 resumed") != std::string::npos);
  const std::string stored_md = text(s.path / "fig5-mqar-capacity" / "section.md");
  CHECK(stored_md.find("every run came finished from the store") != std::string::npos);
  CHECK(stored_md.find("the sweep that trained them") == std::string::npos);
  // Table 4's fixed-A row read against full VLA: the note gives both numbers and their difference, computed
  // (the quick runs stay on the plateau, so it also says what that leaves the ablation unable to show).
  const std::string t4 = text(s.path / "table4-ablation" / "section.md");
  CHECK(t4.find("At d_h = 32, n = 16, fixed A reads ") != std::string::npos);
  CHECK(t4.find("cannot show what the Sherman-Morrison update adds") != std::string::npos);
  // A recipe sweep kept as a run record (OUT/logs/<dir>/verdict.json, full size) is listed under the recipe
  // question beside the section's own; a quick one is not (a smoke run is no result). Missing, a reader of
  // the report would not see the n of sweeps whose stores are gone.
  auto record = [&](const std::string& dir, bool quick) {
    auto v = vla::studies::read_json(s.path / "recipe-sensitivity" / "verdict.json");
    v["quick"] = quick;
    v["facts"]["ns"] = nlohmann::json::array({quick ? 98 : 99});
    fs::create_directories(s.path / "logs" / dir);
    std::ofstream(s.path / "logs" / dir / "verdict.json") << v.dump();
  };
  record("recipe-full", false);
  record("recipe-quick", true);
  {  // a sweep at n = 8 and 16: listed in the sweep's order of n (its escape keys sort as text, "16" < "8")
    auto v = vla::studies::read_json(s.path / "recipe-sensitivity" / "verdict.json");
    v["quick"] = false;
    v["facts"]["ns"] = nlohmann::json::array({8, 16});
    v["facts"]["paper_recipe"] = {{"lr", 3e-4}, {"steps", 2000}};
    v["facts"]["escape"]["vla"]["3e-4/2k"] = {{"8", 0.0}, {"16", 0.2}};
    fs::create_directories(s.path / "logs" / "recipe-order");
    std::ofstream(s.path / "logs" / "recipe-order" / "verdict.json") << v.dump();
  }
  // A chunked-forward benchmark (`vla bench attention` CSV with the columns gpu/bench_torch.py adds, its
  // log with the device, the repetitions and the snapshot): the report shows fused, chunked (full and one-pass TF32
  // products), SDPA bf16 and fla's anchor per
  // T with their ratios, forward and forward + backward (both chunked backwards); a cell not run (nan) stays empty. Missing, the
  // report would not carry the chunked form's benchmark.
  fs::create_directories(s.path / "gpu-bench");
  std::ofstream(s.path / "gpu-bench" / "chunked-vla-8-4-32.csv")
      << "B,H,d,T,vla_ms,vla_chunked_ms,vla_fwdbwd_ms,vla_chunked_fwdbwd_ms,sdpa_bf16_ms,sdpa_fp32_ms,py_loop_ms,sdpa_bf16_fwdbwd_ms,"
         "vla_chunkform_fwdbwd_ms,vla_chunked_tf32_ms\n"
         "8,4,32,4096,4.0,2.0,40.0,8.0,0.5,2.0,100.0,4.0,5.0,1.5\n8,4,32,8192,8.0,4.0,80.0,16.0,nan,4.0,nan,nan,nan,nan\n";
  std::ofstream(s.path / "gpu-bench" / "chunked-vla-8-4-32.log")
      << "snapshot: abc1234\ndevice 0: Test GPU\nfused forward, median of 7 CUDA-event timed runs\n| T | vla ms |\n| 4096 | 9 |\n";
  // The report gathers the ledger (whose training claims now read these verdicts, labelled quick) and
  // every study's section, links pointing into the study folders.
  const auto [rc3, out3] = run(vla + " report --out " + s.path.string(), s.path.string() + ".log");
  INFO(out3);
  REQUIRE(rc3 == 0);
  const std::string report = text(s.path / "REPORT.md");
  CHECK(report.find("## Claims ledger") != std::string::npos);
  for (const auto& st : vla::studies::study_registry()) CHECK(report.find("## " + st.id + " — ") != std::string::npos);
  CHECK(report.find("](fig5-mqar-capacity/plots/") != std::string::npos);
  CHECK(report.find("partial (quick)") != std::string::npos);
  CHECK(report.find("kept as a run record ([logs/recipe-full/section.md](logs/recipe-full/section.md)), n in [99]") != std::string::npos);
  CHECK(report.find("logs/recipe-quick") == std::string::npos);
  CHECK(report.find("n = 8: 0% of seeds; n = 16: 20% of seeds;") != std::string::npos);
  CHECK(report.find("--reps 7` and `gpu/bench_torch.py` in one call (gpu/device-env.sh bench_attention) on Test GPU, git abc1234") !=
        std::string::npos);
  // Forward (with the one-pass TF32 products' column), then forward + backward; fla's anchor (and the ratio
  // to it) only at the T it was measured at.
  CHECK(report.find("| 4096 | 4.00 | 2.000 | 2.00 | 0.5 | 4.00 | 0.865 | 2.31 | 1.500 | 1.73 |") != std::string::npos);
  CHECK(report.find("| 8192 | 8.00 | 4.000 | 2.00 |  |  |  |  |  |  |") != std::string::npos);
  // Forward + backward with both backwards after the chunked forward: the ratios are the faster one's (the
  // chunk form's 5 ms at 4096; at 8192 it was not run, an empty cell, and the group backward's 16 ms counts).
  CHECK(report.find("| 4096 | 40.00 | 8.00 | 5.00 | 8.00 | 4 | 1.25 | 6.97 | 0.72 |") != std::string::npos);
  CHECK(report.find("| 8192 | 80.00 | 16.00 |  | 5.00 |  |  |  |  |") != std::string::npos);
  const auto claims = vla::studies::read_json(s.path / "claims.json");
  for (const auto& c : claims.at("claims"))
    if (c.contains("studies") && c.at("verdict") != "not-run") CHECK(c.at("quick").get<bool>());
  fs::remove(s.path.string() + ".log");
}
