#pragma once
// Seed 002 Theorem 3.3 (= Theorem C.1): after c levels of the multi-level vocabulary decomposition the
// key's residual E = K^(c) (eq. 4-5: K^(i+1) = (K^(i) - S(K^(i) K_t^(i)T) K_t^(i)) W^(i)) is bounded by
//   ||E|| <= ||K|| prod_i eps_i prod_i gamma_i,   eps_i = (n - m) / n,
// n the tokens, m the slots, gamma_i >= ||W_i||. The toolkit's MVA has no W_i (W_i = I: gamma_i = 1), so
// the bound it must meet is ||K^(c)||_F <= ||K||_F ((n - m) / n)^c, the theorem's "c recursions" counting
// c + 1 levels 0..c where the knob counts c (the residual after the knob's c levels is eq. 5's K^(c)).
//
// Measured on MVA's own recurrence (core/rules/mva/): the rule with c levels reports ||k_t^(c)|| as each
// step's e_norm, so ||K^(c)||_F = sqrt(sum_t e_norm_t^2), ||K||_F = sqrt(sum_t ||k_t||^2). Both selections
// of the residual: eq. 4's one-hot S ("one-hot", the theorem as stated) and the softmax that sec. 3.2 puts
// in its place ("softmax", what the mixer trains with).
//
// Protocol: m = d slots; n tokens; q, k, v N(0, 1) and gate logits N(2, 1) (analysis::chunk_test_stream:
// decays ~0.88, memories that hold the last ~8 tokens); the ratio averaged over the seeds (the theorem
// bounds the expected error).
#include <cstdint>
#include <string>
#include <vector>

namespace vla::analysis {

struct MvaDecompositionConfig {
  int d = 8;                                       // d_h = m, the slots
  std::vector<int> ns{16, 32, 64};                 // tokens n (> m: the bound is positive)
  int max_levels = 6;                              // c = 1 .. max_levels
  std::vector<std::uint64_t> seeds{42, 43, 44};
  std::vector<std::string> precisions{"mp50", "double"};
};

struct MvaDecompositionPoint {
  std::string precision, selection;  // "one-hot" or "softmax"
  int n = 0, levels = 0;
  double rel_error = 0;  // mean over seeds of ||K^(c)||_F / ||K||_F
  double bound = 0;      // ((n - m) / n)^c
};

// Every (precision, selection, n, c), in that nesting order.
std::vector<MvaDecompositionPoint> mva_decomposition_error(const MvaDecompositionConfig& cfg);

}  // namespace vla::analysis
