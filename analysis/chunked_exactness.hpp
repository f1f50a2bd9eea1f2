#pragma once
// Seed 004 sec. 4: the chunkwise-parallel form of a rule computes the recurrence's outputs, for any
// chunk size. The additive scalar-decay rules (linear attention, RetNet, Mamba-2;
// core/rules/additive_chunked.hpp) and DeltaNet (core/rules/delta_chunked.hpp) are measured in mp50
// against the rule's own step(): max over chunk sizes of ||O_chunked - O_recurrent||_F / ||O_recurrent||_F.
// The chunked form of a rule by name, in any scalar, is here too, so that the tests measure the same
// function in float and bfloat16 (tests/core/chunked_forms.cpp).
#include "analysis/head_stream.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace vla::analysis {

// The rules with a chunkwise form.
inline const std::vector<std::string> kChunkedRules{"linear", "retnet", "mamba2", "deltanet"};

// d x T inputs N(0, 1), gate logits N(2, 1) (sigmoid ~ 0.88: decays that matter over a chunk), u = 0.
HeadStream chunk_test_stream(int d, int T, std::uint64_t seed);

// The rule stepped over the stream through its own step(), batch 1: the outputs as rows (T, d), in Out.
template <class Out, class Rule> Mat<Out> rule_outputs(const Rule& rule, const HeadStream& s) {
  Mat<Out> O(s.T, s.d);
  drive(rule, s, [&](int t, const auto&, const auto& out, const auto&) { O.row(t - 1) = cast_matrix<Out>(out).transpose(); });
  return O;
}

// The same outputs from the chunked form of `rule` (kChunkedRules, default options), every operation
// in scalar T (the inputs rounded to T first, as the recurrent rule stores them).
template <class T> Mat<T> chunked_outputs(const std::string& rule, const HeadStream& s, int chunk);

// The recurrent rule's outputs in Precision<T>.
template <class T> Mat<T> recurrent_outputs(const std::string& rule, const HeadStream& s);

struct ChunkedExactness {
  std::string rule;
  double max_rel_diff = 0;  // over the chunk sizes, in mp50, reported as double
  int worst_chunk = 0;
};

ChunkedExactness chunked_exactness_mp50(const std::string& rule, const HeadStream& s, const std::vector<int>& chunks);

}  // namespace vla::analysis
