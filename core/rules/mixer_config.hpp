#pragma once
// MixerConfig: everything a user can set about a mixer (the name and every rule's knobs; each rule reads
// the fields it has in its from_config, core/rules/<rule>/), and its knobs (core/knob.hpp): the one list
// from which the command line makes its flags (cli/mixer_options.hpp) and training writes the mixer's
// settings into checkpoint.bin and summary.json. One eps serves every denominator (paper: "eps = 1e-4
// for all denominators"). The defaults are the member initialisers here and in PenaltyOptions.
#include "core/inverse_penalty_tracker.hpp"
#include "core/rules/falcon_options.hpp"

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

namespace vla {

struct MixerConfig {
  std::string mixer = "vla";
  PenaltyOptions penalty;              // VLA: lambda0, eps, delta policy, refresh, rank
  bool renormalise_S = false;          // MemoryMatrixManager renormalisation (default off, 001)
  double renorm_threshold = std::numeric_limits<double>::infinity();
  bool deltanet_gated = true;
  FalconOptions falcon;                // FALCON-2/2A/3/3A: the ridge, the decay clamp, the window
  int mva_levels = 2;                  // MVA: c, the levels of the vocabulary decomposition (seed 002 Table 9: 2)
  bool next_latent = false;            // every rule: write (k_{t-1}, v_t), token 1 writes nothing (core/model/next_latent.hpp)

  bool is_vla() const { return mixer.rfind("vla", 0) == 0; }
};

// The knobs of MixerConfig: PenaltyOptions' and the memory's, DeltaNet's, FALCON's, MVA's and the layer's
// next-latent alignment. The rule's name (mixer)
// is not a knob: commands choose rules in their own ways (--mixer, --mixers).
template <class Config, class Visitor>
  requires std::is_same_v<std::remove_const_t<Config>, MixerConfig>
void for_each_knob(Config& c, Visitor&& v) {
  for_each_knob(c.penalty, v);
  v(knob("renormalise_S", "MemoryMatrixManager: rescale S to renorm_threshold when ||S||_F exceeds it (spec 001)",
         c.renormalise_S));
  v(knob("renorm_threshold", "the ||S||_F above which S is renormalised", c.renorm_threshold, "> 0",
         [](double x) { return x > 0.0; }));
  v(knob("deltanet_gated", "DeltaNet: beta_t = sigmoid(w_g^T x_t + b_g) (eq. 4); false: beta_t = 1", c.deltanet_gated));
  for_each_knob(c.falcon, v);
  v(knob("mva_levels", "MVA: c, the levels of the multi-level vocabulary decomposition (seed 002 eq. 6; 1 = MetaLA + GSA)",
         c.mva_levels, "an integer in [1, 64]", [](int n) { return n >= 1 && n <= 64; }));
  v(knob("next_latent", "every rule: next-latent alignment, the write at token t pairs the key of token t - 1 with v_t and token 1 "
                        "writes nothing (seed 003 sec. 2); the layer and training honour it, the CUDA kernels refuse it",
         c.next_latent));
}

}  // namespace vla
