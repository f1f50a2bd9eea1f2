// MVA's levels c on the command line (--mva-levels, cli/mixer_options.hpp, the knob mva_levels of
// MixerConfig): `vla layer-forward` runs the c it is given (its output is the in-process layer's with that
// c, and differs from another c's), `vla train` stores it in the run's summary, and a c outside [1, 64]
// is refused with exit 2 naming the flag before any work. A failure means the flag does not reach the
// rule (every run silently at the default c = 2), or a run without levels starts.
#include "cli_helpers.hpp"

#include "core/layers/layer_forward.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace vla;
using namespace vla::test;

TEST_CASE("vla layer-forward --mixer mva --mva-levels c runs c levels", "[cli][mva]") {
  ScratchDir dir("mva_levels");
  const int T = 12, d = 4;
  write_random_params(dir.path / "params", d, d, 1, 17, false);
  std::mt19937_64 g(18);
  io::write_npy(dir.path / "params" / "Wg.npy", gaussian(g, d, d, 0.5));  // MVA: one gate logit per slot (d_h rows)
  const Mat<double> X = gaussian(g, T, d, 1.0);
  io::write_npy(dir / "X.npy", X);
  MixerWeights<double> w;
  for (const char* n : {"Wq", "Wk", "Wv", "Wo", "Wg"}) {
    const Mat<double> m = io::read_npy_matrix(dir.path / "params" / (std::string(n) + ".npy"));
    if (std::string(n) == "Wq") w.Wq = m;
    if (std::string(n) == "Wk") w.Wk = m;
    if (std::string(n) == "Wv") w.Wv = m;
    if (std::string(n) == "Wo") w.Wo = m;
    if (std::string(n) == "Wg") w.Wg = m;
  }
  w.bq = w.bk = w.bv = w.bg = Vec<double>::Zero(d);
  w.bo = Vec<double>::Zero(d);
  std::vector<Mat<double>> Y;
  for (const int c : {1, 3}) {
    const auto r = run_command(fmt::format("{} layer-forward --mixer mva --mva-levels {} --precision double --params {} --input {} --output {}",
                                           kVla, c, dir / "params", dir / "X.npy", dir / "Y.npy"));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    Y.push_back(io::read_npy_matrix(dir / "Y.npy"));
    MixerConfig mc;
    mc.mixer = "mva";
    mc.mva_levels = c;
    const Mat<double> ref = layer_forward("double", mc, LayerShape{d, d, 1, 1}, w, X).Y;
    CHECK((Y.back() - ref).cwiseAbs().maxCoeff() == 0.0);  // the same computation in the same precision
  }
  CHECK((Y[0] - Y[1]).norm() > 1e-3 * Y[0].norm());
  const auto bad = run_command(fmt::format("{} layer-forward --mixer mva --mva-levels 0 --precision double --params {} --input {} --output {}",
                                           kVla, dir / "params", dir / "X.npy", dir / "bad.npy"));
  INFO(bad.output);
  CHECK(bad.exit_code == 2);
  CHECK(bad.output.find("--mva-levels: must be an integer in [1, 64], got 0") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "bad.npy"));
}

TEST_CASE("vla train --mixer mva --mva-levels c stores c in the run's summary; 65 is refused", "[cli][mva]") {
  ScratchDir dir("mva_train");
  const std::string tiny = "--task mqar --pairs 4 --d-model 16 --heads 2 --d-head 8 --ffn 32 --layers 1 --steps 2 --batch 4 "
                           "--eval-batches 1 --threads 1";
  const auto r = run_command(fmt::format("{} train {} --mixer mva --mva-levels 3 --out {}", kVla, tiny, dir / "run"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(nlohmann::json::parse(read_file(dir.path / "run/summary.json")).at("config").at("mva_levels") == 3);
  const auto bad = run_command(fmt::format("{} train {} --mixer mva --mva-levels 65 --out {}", kVla, tiny, dir / "bad"));
  INFO(bad.output);
  CHECK(bad.exit_code == 2);
  CHECK(bad.output.find("--mva-levels: must be an integer in [1, 64], got 65") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "bad"));
}
