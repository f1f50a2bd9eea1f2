#pragma once
// The knobs of seed 003's rules (FALCON-2 and FALCON-2A, core/rules/nlms_memory.hpp; FALCON-3 and
// FALCON-3A, core/rules/sliding_window.hpp), declared once here with their defaults (the member
// initialisers) and read by MixerConfig (mixer_config.hpp). The stabiliser eps of eq. (3.4) is not among
// them: it is the mixers' one eps (PenaltyOptions::eps).
#include "core/knob.hpp"

#include <cmath>
#include <type_traits>

namespace vla {

struct FalconOptions {
  // lambda_bar, the dimensionless base ridge of the scaled formulation (seed 003 sec. 4.1): the ridge of
  // eqs. (3.1), (4.4) and (4.6) is lambda_t = lambda_bar ||x_t||^2. The paper does not give its value
  // (its lambda_bar = lambda_scale sigmoid(.) is learned); 0.01 makes the decay fraction
  // eta_t lambda_t = beta lambda_bar / (1 + lambda_bar) ~ 0.01 beta: a memory horizon of ~100 tokens.
  double ridge = 0.01;
  // eps_gamma, the decay clamp: alpha_t = min(eta_t lambda_t, 1 - eps_gamma), gamma_t = 1 - alpha_t >= eps_gamma
  // (seed 003 sec. 3.1 and 4.2). Not given by the paper either; with ridge <= (1 - eps_gamma) / (1 + eps_gamma)
  // the clamp never acts (eta_t lambda_t < 2 ridge / (1 + ridge) <= 1 - eps_gamma).
  double eps_gamma = 1e-3;
  // B, the nominal size of FALCON-3/3A's sliding window (seed 003 sec. 4.4, Algorithm 3): each step takes
  // one gradient step on the last B pairs. The paper does not fix B for its reported runs (FALCON-3A.3's
  // ".3" is a run label, not a window); appendix F names "the small sliding windows used in our
  // experiments (e.g., B = 4)", the default here. 1 is the non-sliding write (FALCON-2 / FALCON-2A's).
  int window = 4;
  void validate() const;
};

template <class Options, class Visitor>
  requires std::is_same_v<std::remove_const_t<Options>, FalconOptions>
void for_each_knob(Options& o, Visitor&& v) {
  v(knob("ridge", "FALCON-2/2A/3: the base ridge lambda_bar, lambda_t = lambda_bar ||x_t||^2 (FALCON-3: the window's mean energy) (seed 003 sec. 4.1, eqs. 4.4, 4.7)",
         o.ridge, "a finite number >= 0", [](double x) { return x >= 0.0 && std::isfinite(x); }));
  v(knob("eps_gamma", "FALCON-2/2A/3: the decay clamp, gamma_t = 1 - min(eta_t lambda_t, 1 - eps_gamma) (seed 003 sec. 4.2); FALCON-3A: gamma_t >= eps_gamma (eq. 4.19)",
         o.eps_gamma, "a number in (0, 1)", [](double x) { return x > 0.0 && x < 1.0; }));
  v(knob("window", "FALCON-3/3A: B, the sliding window's size, the last B pairs (x_j, v_j) (seed 003 sec. 4.4, Algorithm 3)",
         o.window, "an integer in [1, 1024]", [](int n) { return n >= 1 && n <= 1024; }));
}

inline void FalconOptions::validate() const {
  for_each_knob(*this, [](const auto& k) { k.check(); });
}

}  // namespace vla
