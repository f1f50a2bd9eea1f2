// VLALayer / MixerLayer reject bad configurations and inputs with an error naming the parameter.
// A failure means a user would get a crash, a silent NaN, or an error that does not say what to fix.
#include "core/layers/vla_layer.hpp"
#include "core/rules/registry.hpp"

#include <catch2/catch.hpp>

using namespace vla;
using L = VLALayer<Precision<double>>;

namespace {

template <class F> void throws_naming(F&& f, const std::string& name) {
  try {
    f();
    FAIL("no exception; expected one naming " << name);
  } catch (const std::invalid_argument& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find(name) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("VLALayer: single head requires d_head == d_model", "[layer]") {
  throws_naming([] { L(8, 4); }, "d_head");
  CHECK_NOTHROW(L(8, 8));
  CHECK_NOTHROW(L::multi_head(8, 2));
  throws_naming([] { L::multi_head(8, 3); }, "heads");
}

TEST_CASE("VLALayer: lambda0 <= 0 and eps <= 0 are rejected", "[layer]") {
  throws_naming([] { L(4, 4, 1, 0.0); }, "lambda0");
  throws_naming([] { L(4, 4, 1, -1.0); }, "lambda0");
  throws_naming([] { L(4, 4, 1, 0.1, 0.0); }, "eps");
  throws_naming([] { L(4, 4, 1, 0.1, -1e-4); }, "eps");
  throws_naming([] { L(4, 4, 0); }, "rank");
}

TEST_CASE("MixerLayer: non-finite input and dimension mismatches", "[layer]") {
  const L layer(4, 4);
  Mat<double> X = Mat<double>::Ones(3, 4);
  CHECK_NOTHROW(layer.forward({X}));
  X(1, 2) = std::numeric_limits<double>::infinity();
  throws_naming([&] { layer.forward({X}); }, "non-finite");
  throws_naming([&] { layer.forward({Mat<double>::Ones(3, 5)}); }, "d_model");
  throws_naming([&] { layer.forward({Mat<double>::Ones(3, 4), Mat<double>::Ones(2, 4)}); }, "input");
  // A weight of the wrong shape names the weight.
  auto w = layer.weights();
  w.Wq = Mat<double>::Ones(4, 5);
  throws_naming([&] { MixerLayer<VlaRule<Precision<double>>>(layer.shape(), layer.rule(), w); }, "Wq");
  w = layer.weights();
  w.Wu = Mat<double>::Ones(3, 4);
  throws_naming([&] { MixerLayer<VlaRule<Precision<double>>>(layer.shape(), layer.rule(), w); }, "Wu");
  w = layer.weights();
  w.Wo(0, 0) = std::numeric_limits<double>::quiet_NaN();
  throws_naming([&] { MixerLayer<VlaRule<Precision<double>>>(layer.shape(), layer.rule(), w); }, "Wo");
}

TEST_CASE("with_rule rejects an unknown mixer naming the allowed ones", "[layer]") {
  MixerConfig c;
  c.mixer = "mamba";
  throws_naming([&] { with_rule<Precision<double>>(c, [](auto) { return 0; }); }, "--mixer");
  throws_naming([&] { with_precision("fp8", [](auto) { return 0; }); }, "--precision");
}
