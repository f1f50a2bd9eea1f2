#pragma once
// Seed 004 sec. 5.1: a decay gamma_t in (0, 1) bounds the memory. Unrolled, S_t = sum_j (prod_{r=j+1..t}
// gamma_r) v_j k_j^T, so by the triangle inequality ||S_t||_F <= B_t with
//   B_t = gamma_t B_{t-1} + ||k_t|| ||v_t||,  B_0 = 0,
// which stays below sup ||k|| ||v|| / (1 - sup gamma): the state cannot grow without bound, unlike linear
// attention's (gamma = 1). Measured in double on the Sec. 6.2 random inputs (analysis/head_stream.hpp):
#include <cstdint>
#include <string>

namespace vla::analysis {

struct DecayBound {
  std::string rule;
  double max_excess = 0;   // max_t (||S_t||_F - B_t) / B_t: only rounding may make it positive
  double growth = 0;       // mean ||S_t||_F over the last tenth / over (0.4 T, 0.5 T]: ~1 once past the horizon
  double S_T = 0, max_S = 0;
};

// rule: retnet, mamba2 or linear (the undecayed contrast); d_head, T, seed of the random protocol.
DecayBound decay_bound(const std::string& rule, int d_head, int T, std::uint64_t seed);

}  // namespace vla::analysis
