#pragma once
// The inputs of one single-head layer given as named arrays, checked against the layer-forward contract
// (docs/recurrences.md, "The .npy contract of layer-forward"): the same names, shapes and defaults
// whether they come from files (`vla layer-forward`: DIR/<name>.npy) or from a dict of NumPy arrays (the
// Python module, python/). Every error names the parameter as the caller's user knows it (`label`).
#include "core/layers/mixer_weights.hpp"
#include "core/rules/mixer_config.hpp"

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace vla {

// One array as the user gave it.
struct NamedArray {
  Mat<double> data;   // (rows, cols); a 1-D array of length n is (n, 1)
  int ndim = 2;       // 1 or 2
  std::string where;  // how an error names it after the label: the file's path, the dict key; "" = the label alone
};

// The arrays single_head_weights reads, and no others.
inline constexpr std::array<std::string_view, 12> kSingleHeadWeightNames{"Wq", "Wk", "Wv", "Wo", "Wu", "Wg",
                                                                        "bq", "bk", "bv", "bo", "bu", "bg"};

// The array named `name` (Wq, bq, ...), or nullopt when it is absent. For a `required` array that is
// absent the lookup throws std::invalid_argument itself (it knows how to say where it looked).
using ArrayLookup = std::function<std::optional<NamedArray>(const std::string& name, bool required)>;

// X (T, d_model): 2-D with T, d_model >= 1 and every value finite; otherwise std::invalid_argument naming
// `label` (--input, x).
void check_layer_input(const NamedArray& X, std::string_view label);

struct SingleHeadWeights {
  LayerShape shape;  // heads = 1, d_head from Wq's rows, rank from cfg
  MixerWeights<double> w;
};

// The weights of cfg.mixer's single-head layer on inputs of width d_model:
//   Wq, Wk, Wv (d_head, d_model), Wo (d_model, d_head): required, d_head read from Wq's rows;
//   Wu (rank * d_head, d_head): required when the rule has penalty directions (VLA);
//   Wg (gate_rows, d_model): when the rule has a gate (Needs::gate_rows); absent = zero, so the gate is
//     sigmoid(b_g) (0.5 without bg); a (1, n) matrix may be given as a 1-D array of length n;
//   bq, bk, bv (d_head), bo (d_model), bu (rank * d_head), bg (gate_rows): absent = zero.
// Throws std::invalid_argument naming `label` (--params, weights) and the array, or `input_label` for a
// d_model that differs from Wq's, or --mixer for an unknown mixer.
SingleHeadWeights single_head_weights(const MixerConfig& cfg, long d_model, const ArrayLookup& get, std::string_view label,
                                      std::string_view input_label);

}  // namespace vla
