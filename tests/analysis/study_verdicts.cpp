// A training claim takes its verdict from the studies that decide it (analysis/claims.hpp,
// read_study_verdicts): the rule (holds if all hold, fails if all fail, partial otherwise, not-run studies
// left out) and the counterexample (each study's first judged comparison that fails; info comparisons never)
// must be read from the verdict files, not assumed: a wrong rule would print a claim as holding that a study
// found failing, and a counterexample taken from an info line would name a number the verdict did not judge.
#include "analysis/claims.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace vla::analysis;

namespace {
void write_verdict(const fs::path& out, const std::string& id, const std::string& verdict, const nlohmann::json& comparisons) {
  fs::create_directories(out / id);
  std::ofstream(out / id / "verdict.json") << nlohmann::json{{"verdict", verdict}, {"comparisons", comparisons}, {"held", 0}, {"total", 1}}.dump();
}
nlohmann::json cmp(const std::string& item, bool holds, bool info = false) {
  return {{"item", item}, {"holds", holds}, {"info", info}, {"measured", "0.17"}, {"paper", "1.000"}};
}
}  // namespace

TEST_CASE("training claims: verdict and counterexample from the studies' verdict files", "[analysis][claims]") {
  const fs::path out = fs::temp_directory_path() / ("vla_study_verdicts_" + std::to_string(::getpid()));
  fs::remove_all(out);
  ClaimsConfig cfg;
  cfg.out_dir = out;
  write_verdict(out, "a", "partial", nlohmann::json::array({cmp("n = 4", true), cmp("n = 8 (info)", false, true), cmp("n = 8", false), cmp("n = 16", false)}));
  write_verdict(out, "b", "fails", nlohmann::json::array({cmp("T = 64", false)}));
  write_verdict(out, "c", "holds", nlohmann::json::array({cmp("x", true)}));

  ClaimResult r;
  REQUIRE(read_study_verdicts(cfg, {"a", "b", "missing"}, r));
  CHECK(r.verdict == Verdict::Partial);
  CHECK(r.counterexample == "a: n = 8: measured 0.17, paper 1.000; b: T = 64: measured 0.17, paper 1.000");
  CHECK(r.measured.find("study missing: not run") != std::string::npos);

  ClaimResult f;
  REQUIRE(read_study_verdicts(cfg, {"b"}, f));
  CHECK(f.verdict == Verdict::Fails);
  ClaimResult h;
  REQUIRE(read_study_verdicts(cfg, {"c"}, h));
  CHECK(h.verdict == Verdict::Holds);
  CHECK(h.counterexample.empty());
  ClaimResult none;
  CHECK_FALSE(read_study_verdicts(cfg, {"missing"}, none));
  fs::remove_all(out);
}
