// `vla layer-forward` on bad input: exit code 2, a message naming the parameter, and no output (nor
// any temporary file) left behind. A failure means a researcher could get a half-written or stale
// result, or an error that does not say what to fix.
#include "cli_helpers.hpp"

#include <catch2/catch.hpp>

using namespace vla;
using namespace vla::test;

namespace {

struct Case {
  ScratchDir dir{"bad"};
  Case() {
    write_random_params(dir.path / "params", 4, 4, 1, 3, false);
    std::mt19937_64 g(4);
    io::write_npy(dir / "X.npy", gaussian(g, 5, 4, 1.0));
  }
  // Runs layer-forward with `args` and checks the failure contract.
  void expect_failure(const std::string& args, const std::string& must_mention) {
    const std::string cmd = fmt::format("{} layer-forward --output {} --trace {} {}", kVla, dir / "out/Y.npy",
                                        dir / "out/trace.csv", args);
    const auto r = run_command(cmd);
    INFO(cmd);
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK(r.output.find(must_mention) != std::string::npos);
    CHECK_FALSE(fs::exists(dir.path / "out/Y.npy"));
    CHECK_FALSE(fs::exists(dir.path / "out/trace.csv"));
    if (fs::exists(dir.path / "out")) CHECK(fs::is_empty(dir.path / "out"));  // no .tmp / .staged files
  }
  std::string good(const std::string& mixer = "vla") const {
    return fmt::format("--mixer {} --params {} --input {}", mixer, dir / "params", dir / "X.npy");
  }
};

}  // namespace

TEST_CASE("layer-forward: a good run writes Y and the trace", "[cli]") {
  // The control for the failure cases below: the same files succeed, so each failure is caused by
  // the one thing that case changes.
  Case c;
  const auto r = run_command(fmt::format("{} layer-forward {} --output {} --trace {}", kVla, c.good(), c.dir / "Y.npy",
                                         c.dir / "trace.csv"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const Mat<double> Y = io::read_npy_matrix(c.dir / "Y.npy");
  CHECK(Y.rows() == 5);
  CHECK(Y.cols() == 4);
  std::ifstream tr(c.dir / "trace.csv");
  std::string header;
  std::getline(tr, header);
  CHECK(header == "t,S_fro,A_fro,delta,e_norm");
  int rows = 0;
  for (std::string line; std::getline(tr, line);) ++rows;
  CHECK(rows == 5);
}

TEST_CASE("layer-forward: missing params file", "[cli]") {
  Case c;
  fs::remove(c.dir.path / "params/Wk.npy");
  c.expect_failure(c.good(), "Wk.npy");
  c.expect_failure(c.good(), "--params");
}

TEST_CASE("layer-forward: malformed npy", "[cli]") {
  Case c;
  std::ofstream(c.dir.path / "params/Wv.npy") << "\x93NUMPY\x01\x00garbage";
  c.expect_failure(c.good(), "Wv.npy");
  std::ofstream(c.dir.path / "X.npy") << "not an npy file";
  c.expect_failure(c.good("linear"), "--input");
}

TEST_CASE("layer-forward: d_model mismatch between X and the weights", "[cli]") {
  Case c;
  std::mt19937_64 g(5);
  io::write_npy(c.dir / "X.npy", gaussian(g, 5, 6, 1.0));  // d_model 6, weights say 4
  c.expect_failure(c.good(), "d_model");
  Case c2;
  io::write_npy(c2.dir / "params/Wo.npy", gaussian(g, 4, 3, 1.0));  // Wo must be (d_model, d_head) = (4, 4)
  c2.expect_failure(c2.good(), "Wo.npy");
}

TEST_CASE("layer-forward: --lambda0 0, --eps 0, bad options", "[cli]") {
  Case c;
  c.expect_failure(c.good() + " --lambda0 0", "--lambda0");
  c.expect_failure(c.good() + " --eps 0", "--eps");
  c.expect_failure(c.good() + " --rank 0", "--rank");
  c.expect_failure(c.good() + " --delta-policy sometimes", "--delta-policy");
  c.expect_failure(c.good() + " --device tpu", "--device");
  c.expect_failure(c.good() + " --recurrent-form chunked", "--recurrent-form");  // a CUDA kernel's choice on the CPU
  c.expect_failure(c.good() + " --products tf32", "--products");                  // likewise
  c.expect_failure(c.good() + " --products bf16", "full, tf32");                  // not a mode: the allowed ones listed
}

TEST_CASE("layer-forward: unknown --mixer and --precision", "[cli]") {
  Case c;
  c.expect_failure(c.good("mamba"), "--mixer");
  c.expect_failure(c.good() + " --precision fp8", "--precision");
}

TEST_CASE("layer-forward: non-finite input", "[cli]") {
  Case c;
  Mat<double> X = Mat<double>::Ones(5, 4);
  X(2, 1) = std::numeric_limits<double>::quiet_NaN();
  io::write_npy(c.dir / "X.npy", X);
  c.expect_failure(c.good(), "--input");
}

TEST_CASE("layer-forward: an input its precision cannot carry fails, naming the step, the quantity, the precision",
          "[cli][non-finite]") {
  // If this fails, `vla layer-forward` writes a finite but wrong Y (the all-zero output VLA in double
  // gave on an input scaled by 1e300), or an error that does not say where the failure began.
  Case c;
  std::mt19937_64 g(4);
  io::write_npy(c.dir / "X.npy", Mat<double>(gaussian(g, 5, 4, 1.0) * 1e300));
  const std::string cmd = fmt::format("{} layer-forward {} --precision double --output {} --trace {}", kVla, c.good(),
                                      c.dir / "out/Y.npy", c.dir / "out/trace.csv");
  const auto r = run_command(cmd);
  INFO(cmd);
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("non-finite value: o_t at step 1") != std::string::npos);
  CHECK(r.output.find("in double") != std::string::npos);
  CHECK_FALSE(fs::exists(c.dir.path / "out/Y.npy"));
  CHECK_FALSE(fs::exists(c.dir.path / "out/trace.csv"));
  // In float the same input is refused before any step: 1e300 is not a float.
  const auto rf = run_command(fmt::format("{} layer-forward {} --precision float --output {}", kVla, c.good(),
                                          c.dir / "out/Y.npy"));
  INFO(rf.output);
  CHECK(rf.exit_code == 2);
  CHECK(rf.output.find("beyond the largest finite value of float") != std::string::npos);
}

TEST_CASE("layer-forward --device cuda: the CUDA path refuses what fp32 cannot carry and fails on a non-finite row",
          "[cli][non-finite][gpu]") {
  // The CUDA path computes in fp32 and a kernel cannot stop at a step, so the command checks the input
  // range before launching and every output row after (cli/commands/layer_forward.cpp). If this fails,
  // `vla layer-forward --device cuda` writes a Y holding NaN, or the zero rows an overflowing
  // normaliser used to give, or an error that does not say what went wrong.
  ScratchDir dir{"cuda-range"};
  write_random_params(dir.path / "params", 16, 16, 1, 3, false);
  std::mt19937_64 g(4);
  const Mat<double> X = gaussian(g, 6, 16, 1.0);
  auto run = [&](double scale) {
    io::write_npy(dir / "X.npy", Mat<double>(X * scale));
    const std::string cmd = fmt::format("{} layer-forward --mixer vla --device cuda --params {} --input {} --output {}", kVla,
                                        dir / "params", dir / "X.npy", dir / "out/Y.npy");
    INFO(cmd);
    return run_command(cmd);
  };
  const auto ok = run(1.0);
  if (ok.output.find("not available") != std::string::npos) { WARN("this build has no CUDA path: skipped"); return; }
  INFO(ok.output);
  REQUIRE(ok.exit_code == 0);
  fs::remove(dir.path / "out/Y.npy");
  // 1e39 is past float's range: refused before any launch.
  const auto big = run(1e39);
  INFO(big.output);
  CHECK(big.exit_code == 2);
  CHECK(big.output.find("float (the CUDA path)") != std::string::npos);
  CHECK_FALSE(fs::exists(dir.path / "out/Y.npy"));
  // 1e20 is a float, but ||phi(k)||^2 and phi(q)^T z overflow fp32 at the first step: the kernel gives
  // NaN (never unit(k) = 0 or S q / inf = 0) and the command names the row.
  const auto over = run(1e20);
  INFO(over.output);
  CHECK(over.exit_code == 1);
  CHECK(over.output.find("y_t at step 1") != std::string::npos);
  CHECK_FALSE(fs::exists(dir.path / "out/Y.npy"));
}
