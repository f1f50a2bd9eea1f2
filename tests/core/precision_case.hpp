#pragma once
// The shared case of the precision tests: one single-head layer (d_model = d_head = 8), T = 16 tokens,
// fixed random weights and inputs, run for a mixer in precision P; Y returned in double.
// precision_reference.cpp computes it in mp100 (the ground truth); precision_*.cpp in each format.
#include "core/layers/layer_forward.hpp"
#include "core/layers/mixer_layer.hpp"
#include "core/rules/registry.hpp"

#include <random>
#include <string>
#include <tuple>

#include <catch2/catch.hpp>

namespace vla::test {

inline constexpr int kPrecT = 16, kPrecD = 8;

inline const MixerWeights<double>& precision_case_weights() {
  static const MixerWeights<double> w = [] {
    LayerShape s{kPrecD, kPrecD, 1, 1};
    auto w = random_weights<double>(s, Needs{.penalty = true, .gate = true}, 21);
    return w;
  }();
  return w;
}

inline const Mat<double>& precision_case_input() {
  static const Mat<double> X = [] {
    std::mt19937_64 g(22);
    std::normal_distribution<double> n;
    Mat<double> x(kPrecT, kPrecD);  // (T, d_model)
    for (int t = 0; t < kPrecT; ++t)
      for (int i = 0; i < kPrecD; ++i) x(t, i) = n(g);
    return x;
  }();
  return X;
}

// The shared weights with as many gate rows as `needs` reads (Needs::gate_rows): row 0 is the shared
// scalar gate's, the others are drawn from their own generator, so that the one-gate rules' case does
// not depend on the wider rules.
inline MixerWeights<double> precision_case_weights(const Needs& needs) {
  MixerWeights<double> w = precision_case_weights();
  const int rows = needs.gate_rows(kPrecD);
  if (rows > 1) {
    std::mt19937_64 g(23);
    const Mat<double> more = gaussian_matrix(g, rows - 1, kPrecD, 1.0 / std::sqrt(double(kPrecD)));
    w.Wg.conservativeResize(rows, kPrecD);
    w.Wg.bottomRows(rows - 1) = more;
  }
  return w;
}

// Y (T, d_model) of the mixer cfg (its name and knobs) in precision P, from the double weights and input
// rounded once to P's storage type: layer_forward<P>, explicitly instantiated in the core library for
// every precision of the table, so that a test calling this does not compile every rule in every format.
template <class P> Mat<double> precision_case_run(const MixerConfig& cfg) {
  return layer_forward<P>(cfg, LayerShape{kPrecD, kPrecD, 1, 1}, precision_case_weights(rule_needs(cfg)),
                          precision_case_input()).Y;
}
template <class P> Mat<double> precision_case_run(const std::string& mixer) {
  MixerConfig cfg;
  cfg.mixer = mixer;
  return precision_case_run<P>(cfg);
}

// The mp100 result (computed once per mixer, in precision_reference.cpp).
const Mat<double>& precision_case_reference(const std::string& mixer);

// max_t ||y_t - y_ref_t|| / max_t ||y_ref_t||
inline double precision_case_error(const Mat<double>& Y, const Mat<double>& R) {
  return (Y - R).rowwise().norm().maxCoeff() / R.rowwise().norm().maxCoeff();
}

// The tolerance for a format whose *storage* unit roundoff is u. Every state element and every
// projection is rounded to storage each step, so the storage u governs even when compute is wider.
// Probabilistic rounding-error analysis (Higham & Mary 2019, Thm 2.4): n chained rounded ops have
// relative error below lambda * sqrt(n) * u with probability >= 1 - 2n exp(-lambda^2 / 2). Along a
// forward of T steps each output depends on ~T * 4d chained roundings (projection, write S k, read
// S phi(q) and z^T phi(q), output projection, each a length-d dot product): n = 16 * 32 = 512,
// sqrt(n) ~ 23. lambda = 6 makes the bound fail with probability < 2e-5; a further factor 4/3
// covers the amplification by the recurrences (kappa of the VLA penalty M_t < 25 for T = 16, d = 8,
// entering only through the unit-normalised alpha_hat; the residual write's ||I - alpha_hat k_hat^T||_2
// is modestly above 1). lambda_eff = 8: tol = 8 * sqrt(512) * u ~ 181 u.
// (Measured, for the record, not used: 1.0 to 6.4 u across all formats and mixers; docs/recurrences.md.)
inline double precision_case_tolerance(double u) { return 8.0 * std::sqrt(double(kPrecT) * 4 * kPrecD) * u; }

inline const char* const kPrecMixers[] = {"vla", "linear", "deltanet", "softmax"};

// Precision P against the mp100 result ref of `mixer` (a MixerConfig: its name and knobs) on the shared case,
// tolerance from P's storage unit roundoff (precision_case_tolerance).
template <class P> void check_against_reference(const MixerConfig& mixer, const Mat<double>& ref) {
  const double u = unit_roundoff<typename P::storage_t>();
  const double err = precision_case_error(precision_case_run<P>(mixer), ref);
  INFO(P::name() << " " << mixer.mixer << ": relative error " << err << " = " << err / u << " u, tolerance "
                 << precision_case_tolerance(u) / u << " u");
  CHECK(err <= precision_case_tolerance(u));
  CHECK(err == err);  // not NaN
}

// Every mixer of kPrecMixers in precision P against mp100. Used by precision_{ieee,low,mixed}.cpp, one TU
// per family to keep compile times small.
template <class P> void check_against_mp100() {
  for (const char* m : kPrecMixers) {
    MixerConfig cfg;
    cfg.mixer = m;
    check_against_reference<P>(cfg, precision_case_reference(m));
  }
}

// The formats a rule's own test holds against mp100: every row of the table but the MPFR ones.
using PrecisionCaseFormats = std::tuple<Precision<float>, Precision<double>, Precision<half>, Precision<bfloat16>,
                                        Precision<half, float>, Precision<bfloat16, float>>;

// One mixer (its name and knobs) in each of Formats against its result in mp100, computed here: a rule's
// own test. A template, so that a TU that includes this header and does not call it does not compile
// every format. Returns the mp100 result, for a caller that holds another format against it.
template <class Formats = PrecisionCaseFormats> Mat<double> check_mixer_against_mp100(const MixerConfig& mixer) {
  const Mat<double> ref = precision_case_run<Precision<mp100>>(mixer);
  std::apply([&](auto... p) { (check_against_reference<decltype(p)>(mixer, ref), ...); }, Formats{});
  return ref;
}

template <class Formats = PrecisionCaseFormats> Mat<double> check_mixer_against_mp100(const std::string& mixer) {
  MixerConfig cfg;
  cfg.mixer = mixer;
  return check_mixer_against_mp100<Formats>(cfg);
}

// mp50 against the mp100 result ref: both far below double's rounding, so the two read back in double
// must agree to a few double roundings; more means the rule loses precision that mp50 should carry (a
// constant or a step computed in double).
inline void check_mp50_rounds_to_double(const std::string& mixer, const Mat<double>& ref) {
  const double err = precision_case_error(precision_case_run<Precision<mp50>>(mixer), ref);
  INFO("mp50 " << mixer << ": relative error " << err);
  CHECK(err <= 4 * unit_roundoff<double>());
}

}  // namespace vla::test
