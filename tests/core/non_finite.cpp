// No silent wrong answer (core/rules/non_finite.hpp): at every input scale a precision cannot hold,
// layer_forward either refuses the input (out of the storage format's range), or stops with
// NonFiniteError naming the step and the quantity, or returns what mp100 returns to within the
// precision's tolerance (where mp100's output itself exceeds double's range, only an error is right),
// or, where mp100's output itself lies below the format's normal range (RetNet's
// o = S q is cubic in the input scale), returns an output below that range too: the exact answer
// rounded to the format has no significant digits left, and the format can say no more. A finite
// answer off the ground truth is the one outcome not allowed.
//
// The grid: every mixer, at the scales the reliability contract names (docs/recurrences.md, "Scale"):
// 1e-300, 1e-150, 1e150 and 1e300 in double; half's and bfloat16's largest and smallest normal
// numbers. The case is the precision tests' (d = 8, T = 16, precision_case.hpp) with X scaled.
#include "core/layers/layer_forward.hpp"
#include "core/rules/normalised_memory.hpp"
#include "precision_case.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <iostream>
#include <limits>
#include <string>

using namespace vla;
using namespace vla::test;

namespace {

enum class Outcome { Exact, Refused, NonFinite, BelowRange, Wrong };

const char* name(Outcome o) {
  switch (o) {
    case Outcome::Exact: return "matches mp100";
    case Outcome::Refused: return "input refused";
    case Outcome::NonFinite: return "non-finite, stopped";
    case Outcome::BelowRange: return "output below range";
    case Outcome::Wrong: return "WRONG";
  }
  return "?";
}

struct Cell {
  Outcome outcome;
  std::string detail;  // the error message, or the measured relative error
};

// Runs `mixer` in `precision` on the shared case with X scaled by `scale`, against mp100.
Cell run_cell(const std::string& mixer, const std::string& precision, double scale) {
  MixerConfig cfg;
  cfg.mixer = mixer;
  const LayerShape shape{kPrecD, kPrecD, 1, 1};
  const Mat<double> X = precision_case_input() * scale;
  const MixerWeights<double> w = precision_case_weights(rule_needs(cfg));
  const Mat<double> R = layer_forward("mp100", cfg, shape, w, X).Y;
  try {
    const Mat<double> Y = layer_forward(precision, cfg, shape, w, X).Y;
    if (!all_finite(R))  // mp100's answer, rounded to double, overflows: no finite answer is right
      return {Outcome::Wrong, "mp100's output exceeds double's range, this precision returned a finite one"};
    double u = 0, smallest = 0;
    with_precision(precision, [&](auto p) {
      using S = typename decltype(p)::storage_t;
      u = unit_roundoff<S>();
      smallest = to_double(std::numeric_limits<S>::min());
    });
    const double rmax = R.cwiseAbs().maxCoeff(), ymax = Y.cwiseAbs().maxCoeff();
    if (rmax < smallest)  // mp100's answer is below the format's normal range
      return {all_finite(Y) && ymax < smallest ? Outcome::BelowRange : Outcome::Wrong,
              fmt::format("mp100's largest |y| {:.3g}, this precision's {:.3g}, smallest normal {:.3g}", rmax, ymax, smallest)};
    // Both scaled by 1/max|R| first: the norms' squares of a 1e-300 output would underflow.
    const double err = precision_case_error(Y / rmax, R / rmax);
    const bool ok = all_finite(Y) && err <= precision_case_tolerance(u);
    return {ok ? Outcome::Exact : Outcome::Wrong, fmt::format("relative error {:.3g} (tolerance {:.3g})", err,
                                                             precision_case_tolerance(u))};
  } catch (const NonFiniteError& e) {
    return {Outcome::NonFinite, e.what()};
  } catch (const std::invalid_argument& e) {
    return {Outcome::Refused, e.what()};
  }
}

void check_grid(const std::string& precision, std::initializer_list<double> scales) {
  for (const char* mixer : {"vla", "linear", "deltanet", "softmax", "retnet", "mamba2", "delta", "gated-deltanet", "gla", "falcon2",
                            "falcon2a", "falcon3", "falcon3a", "metala", "gsa", "mva"}) {
    for (const double s : scales) {
      const Cell c = run_cell(mixer, precision, s);
      std::cout << fmt::format("scale grid: {:8s} {:10s} x {:<9.3g} {:20s} {}\n", mixer, precision, s, name(c.outcome),
                               c.detail);
      INFO(fmt::format("{} in {} at input scale {:g}: {}", mixer, precision, s, c.detail));
      CHECK(c.outcome != Outcome::Wrong);
    }
  }
}

}  // namespace

TEST_CASE("the eq. 11 read with an overflowed normaliser gives NaN, not 0", "[non-finite]") {
  // If this fails, S phi(q) / inf = 0 reaches the output as a finite number: the silent wrong answer
  // `vla layer-forward` gave on inputs scaled by 1e300.
  const Mat<double> S = Mat<double>::Identity(3, 3);
  const Vec<double> q_feat = Vec<double>::Constant(3, 1e200), z = Vec<double>::Constant(3, 1e200);
  const Vec<double> o = normalised_read<double>(S, q_feat, z, 1e-4);
  CHECK(o.array().isNaN().all());
  // In range, the read is eq. 11 itself.
  const Vec<double> z1 = Vec<double>::Constant(3, 2.0), q1 = Vec<double>::Constant(3, 1.0);
  CHECK((normalised_read<double>(S, q1, z1, 1e-4) - q1 / 6.0).norm() == 0.0);
}

TEST_CASE("unit() is exact at every scale a format holds", "[non-finite]") {
  // If this fails, unit() returns 0 (a square overflowed: half from |x| ~ 256) or a vector that is not
  // of unit length (the squares underflowed), and VLA's k_hat, u and alpha_hat are silently wrong.
  const Vec<double> x = (Vec<double>(3) << 3.0, -4.0, 12.0).finished();  // ||x|| = 13
  const Vec<double> want = x / 13.0;
  for (const double s : {1e-300, 1e-160, 1.0, 1e160, 1e300}) CHECK((unit<double>(x * s) - want).norm() <= 4e-16);
  for (const double s : {1e-4, 1.0, 300.0, 5000.0}) {  // half: normal range 6.1e-5 .. 65504; 12 * 5000 = 6e4
    const Vec<half> h = cast_vector<half>(Vec<double>(x * s));
    const Vec<double> got = cast_vector<double>(unit<half>(h));
    INFO("half at scale " << s);
    CHECK((got - want).norm() <= 4 * unit_roundoff<half>());
  }
  CHECK(unit<double>(Vec<double>::Zero(3)) == Vec<double>::Zero(3));  // a zero vector stays zero
}

TEST_CASE("scale grid in double: 1e-300, 1e-150, 1e150, 1e300", "[non-finite]") {
  // If this fails, some mixer returns a finite result in double that mp100 contradicts at an extreme
  // but representable input scale: a silent wrong answer (the line printed says which and by how much).
  check_grid("double", {1e-300, 1e-150, 1e150, 1e300});
}

TEST_CASE("scale grid in half and bfloat16: the format's largest and smallest normal numbers", "[non-finite]") {
  // If this fails, a 16-bit format gives a finite wrong answer at the edge of its range instead of an
  // error: exactly what users come to this toolkit to see.
  const double h_max = 65504.0, h_min = 6.103515625e-05;           // half
  const double b_max = 3.3895313892515355e38, b_min = 1.1754943508222875e-38;  // bfloat16
  // precision_case_input() is N(0, 1): its largest |x| is ~2.6, its smallest token maximum ~0.9.
  const double amax = precision_case_input().cwiseAbs().maxCoeff();
  check_grid("half", {h_max / amax, h_min * 2.0, h_min / 4.0});
  check_grid("bfloat16", {b_max / amax, b_min * 2.0, b_min / 4.0});
  check_grid("half+float", {h_max / amax, h_min * 2.0});
}

TEST_CASE("layer_forward names the step, the quantity and the precision of the first non-finite value",
          "[non-finite]") {
  // If this fails, the reproducer (VLA in double on an input scaled by 1e300, which returned an
  // all-zero output) is silent again, or the error does not say where the failure began.
  MixerConfig cfg;
  cfg.mixer = "vla";
  const Mat<double> X = precision_case_input() * 1e300;
  try {
    layer_forward("double", cfg, LayerShape{kPrecD, kPrecD, 1, 1}, precision_case_weights(), X);
    FAIL("no NonFiniteError");
  } catch (const NonFiniteError& e) {
    CHECK(e.step() == 1);
    CHECK(e.quantity() == "o_t");  // S_t and z_t hold ~1e300; phi(q)^T z_t overflows in the read
    CHECK(std::string(e.what()).find("in double") != std::string::npos);
  }
}
