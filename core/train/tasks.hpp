#pragma once
// The synthetic tasks the paper trains on, as batches of (tokens, targets); target -1 = no loss.
//
// Token layout in the vocabulary of 128 (the paper leaves it open; chosen so that in-distribution
// keys, values and out-of-distribution keys are the layout of Table 13):
//   keys      {0..63}    (training and in-distribution evaluation)
//   values    {64..126}  (63 values, drawn with replacement)
//   OOD keys  {64..126}  (--ood: evaluation keys drawn from the value range, never seen as keys)
//   separator 127        (the last token: used by no key or value, so the model can find it)
// MQAR (Sec. 5.2, Fig. 1): k_1 v_1 ... k_n v_n SEP q_1 ... q_n, the q_i the n (distinct) keys in a
//   shuffled order; T = 3n + 1; the target at q_i's position is its value (loss only there).
//   Long context (--seq-len T > 3n + 1, Fig. 6; the paper does not give its layout):
//   k_1 v_1 ... k_n v_n f_1 ... f_{T-3n-1} SEP q_1 ... q_n, the filler f_j drawn uniformly from the
//   value range: the gap between the pairs and their queries grows with T, and the memory has T - 3n - 1
//   more writes to keep the pairs through (tokens it must not bind to a key). The pairs, the queries
//   and their order are the draws of T = 3n + 1; the filler has a generator of its own.
// Copy: x_1 .. x_m SEP x_1 .. x_{m-1} with m = T/2 content tokens from {0..126}; the target at
//   position p >= m is the next copied token (x_1 after SEP, ...), so T inputs predict m tokens.
// Batches are generated from (seed, index) alone, so step s's batch never depends on what ran
// before it: resuming reproduces the uninterrupted run.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace vla::train {

inline constexpr int kVocab = 128;
inline constexpr int kSeparator = 127;
inline constexpr int kKeyLo = 0, kKeyHi = 63;      // inclusive
inline constexpr int kValueLo = 64, kValueHi = 126;
inline constexpr int kOodKeyLo = 64, kOodKeyHi = 126;

struct Batch {
  std::vector<std::vector<int>> tokens;   // (B, T)
  std::vector<std::vector<int>> targets;  // (B, T), -1 where there is no loss
};

struct TaskConfig {
  std::string task = "mqar";  // mqar | copy
  int pairs = 8;              // MQAR n
  int seq_len = 0;            // copy: T (even, >= 4); MQAR: 0 (T = 3n + 1) or T >= 3n + 1
  int length() const { return task == "mqar" ? std::max(seq_len, 3 * pairs + 1) : seq_len; }
  void validate() const;      // throws std::invalid_argument naming the parameter
};

// Splitmix64 of (seed, index): the per-batch generator seed.
std::uint64_t batch_seed(std::uint64_t seed, std::uint64_t index);
Batch make_batch(const TaskConfig& task, int batch, std::uint64_t seed, bool ood = false);

}  // namespace vla::train
