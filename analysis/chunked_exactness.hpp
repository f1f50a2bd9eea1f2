#pragma once
// Seed 004 sec. 4: the chunkwise-parallel form of an additive scalar-decay rule (linear attention,
// RetNet, Mamba-2; core/rules/additive_chunked.hpp) computes the recurrence's outputs, for any chunk
// size. Measured in mp50 against the rule's own step(): max over chunk sizes of
// ||O_chunked - O_recurrent||_F / ||O_recurrent||_F, on N(0, 1) inputs (Mamba-2 gate logits N(2, 1)).
#include <cstdint>
#include <string>
#include <vector>

namespace vla::analysis {

struct ChunkedExactness {
  std::string rule;
  double max_rel_diff = 0;  // over the chunk sizes, mp50, rounded to double for reporting
  int worst_chunk = 0;
};

// rule: linear, retnet or mamba2; T tokens, head size d, the chunk sizes to try.
ChunkedExactness chunked_exactness_mp50(const std::string& rule, int T, int d, const std::vector<int>& chunks, std::uint64_t seed);

}  // namespace vla::analysis
