#pragma once
// Seed 004 sec. 4: the chunkwise-parallel form of a rule computes the recurrence's outputs, for any
// chunk size. The additive scalar-decay rules (linear attention, RetNet, Mamba-2;
// core/rules/additive_chunked.hpp), DeltaNet and Gated DeltaNet (core/rules/delta_chunked.hpp), GLA and
// MetaLA (core/rules/gla/chunked.hpp), FALCON-2 and FALCON-2A (core/rules/falcon2/chunked.hpp) and VLA
// (Algorithm 1, core/rules/vla/chunked.hpp) are measured in mp50
// against the rule's own step(): max over chunk sizes of ||O_chunked - O_recurrent||_F / ||O_recurrent||_F.
// The chunked form of a rule by name, in any scalar, is here too, so that the tests measure the same
// function in float and bfloat16 (tests/core/chunked_forms.cpp).
#include "analysis/head_stream.hpp"
#include "core/rules/vla/forward.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace vla::analysis {

// The rules with a chunkwise form.
inline const std::vector<std::string> kChunkedRules{"linear", "retnet", "mamba2", "deltanet", "delta", "gated-deltanet", "gla",
                                                    "metala", "falcon2", "falcon2a", "vla"};

// d x T inputs N(0, 1) (q, k, v and VLA's u), gate logits N(2, 1) (sigmoid ~ 0.88: decays that matter over
// a chunk), max(d, 2) of them per token (row 0 the scalar gates, rows 0-1 Gated DeltaNet's, all GLA's and
// the slot rules').
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

// Algorithm 1 with options opt (a variant, the guard, the refresh) against its chunked form
// (core/rules/vla/chunked.hpp), in mp50, the same measure; `chunks` counts the chunks the form used at the
// largest chunk size (refreshes and skipped tokens split nominal chunks).
struct VlaChunkedExactness : ChunkedExactness {
  int chunks = 0;
  int guard_fired = 0;  // tokens whose delta the guard changed
};
VlaChunkedExactness vla_chunked_exactness_mp50(const VlaOptions& opt, const HeadStream& s, const std::vector<int>& chunks);

// The penalty chain (core/rules/vla/penalty_chain.hpp, (P1)-(P3)): A at every group start from one 2d x 2d
// product per group and one solve, against Algorithm 1's tracker stepping every token, in mp50: the worst
// relative Frobenius distance over the group starts and the group lengths (segments per group).
struct PenaltyChainExactness {
  double max_rel_diff = 0;
  int worst_group = 0;
  int groups = 0;  // group starts compared, over all group lengths
};
PenaltyChainExactness penalty_chain_exactness_mp50(const VlaOptions& opt, const HeadStream& s, const std::vector<int>& groups);

// The two systems the chunked VLA solves per chunk, over a stream (double, 2-norm condition numbers): the
// penalty Gram G = I + U A_c U^T of (V1), factored L D L^T (eigenvalues in [1, 1 + ||A_c|| n / d] in exact
// arithmetic), and the memory's unit lower-triangular I + L of (D1), L_ij = k_hat_i . alpha_hat_j, whose
// inverse the forward substitution applies (docs/chunkwise-vla.md, "Conditioning").
struct VlaChunkConditioning {
  int chunks = 0;
  double gram_cond_max = 0, gram_eig_min = 0;  // over chunks: max cond(G), min lambda_min(G)
  double solve_cond_max = 0;                   // max cond(I + L)
  double solve_inv_norm_max = 0;               // max ||(I + L)^{-1}||_2
};
VlaChunkConditioning vla_chunk_conditioning(const VlaOptions& opt, const HeadStream& s, int chunk);
// (V1)'s a-priori bound on lambda_max(G), hence on cond(G) (lambda_min >= 1), over T tokens of width d in chunks of
// `chunk`: 1 + ||A_c|| n / d with n the longest chunk (the refresh cuts chunks at its period) and
// ||A_c|| <= 1 / lambda0 + m eta after the m refreshes of T tokens (docs/chunkwise-vla.md, "Conditioning").
double vla_gram_bound(const VlaOptions& opt, int T, int d, int chunk);

}  // namespace vla::analysis
