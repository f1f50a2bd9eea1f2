#pragma once
// The backward of one VLA head computed group by group: tokens cut into groups of `group_tokens`
// consecutive tokens [a, b) (the last one may be shorter), every group walked independently, and only
// two short chains of d x d products across groups (docs/chunkwise-vla.md, "The backward across
// groups", equations B1-B3, C1-C2). In exact arithmetic it gives the sequential reverse pass's gradients
// (core/model/head.hpp head_backward with Adjoint<VlaRule<P>>, core/rules/vla/adjoint.hpp), row for row:
// this is the CPU reference of the algorithm a CUDA backward parallel over groups implements.
//
// Why it splits: the adjoint carries (dS, dz, dA) from token t to t - 1, and
//  - dS never reads dz or dA: dS_{t-1} = (dS_t + read_t) M_t with M_t = I - alpha_hat_t k_hat_t^T, so
//    over a group dS_a = dS_b R_g + dS^0_a, R_g = M_{b-1} ... M_a;
//  - dz only accumulates the read's terms: dz_a = dz_b + dz^0_a;
//  - only the symmetric part Sigma of dA reaches a gradient, and the Sherman-Morrison step's adjoint maps
//    it by a congruence: Sigma_{t-1} = F_t^T (Sigma_t + sym(da_t k_hat_t^T)) F_t, F_t = I - zv_t u_t^T / delta_t,
//    so over a group Sigma_a = Phi_g^T Sigma_b Phi_g + sym(dA^0_a), Phi_g = F_{b-1} ... F_a; the local term
//    da_t reads dS, hence dA^0_a is walked from the true dS_b.
// The passes:
//  (B1) every group: walk from (0, 0, 0) -> dS^0_a, dz^0_a; and R_g from the group's alpha_hat_t, k_hat_t.
//  (C1) groups in reverse order: dS_b = dz_b = 0 after the last; dS_a = dS_b R_g + dS^0_a, dz_a = dz_b + dz^0_a.
//  (B2) every group: walk from (dS_b, dz_b, 0) -> dA^0_a; and Phi_g from the group's zv_t, u_t, delta_t.
//  (C2) groups in reverse order: Sigma_b = 0 after the last; Sigma_a = Phi_g^T Sigma_b Phi_g + sym(dA^0_a).
//  (B3) every group: walk from (dS_b, dz_b, Sigma_b) -> the group's rows of dq, dk, dv, du.
// Every walk is Adjoint<VlaRule<P>>::step itself, started from a set carry: the arithmetic per token is the
// sequential pass's. The delta guard (Alg. 1 lines 13-15): a skipped token has F_t = I; a clamped token
// (delta_t < eps, divided by eps, no d delta term) maps Sigma -> Sigma - (Sigma zv u^T + u zv^T Sigma) / eps,
// linear but not a congruence, so a group holding one applies its token maps to Sigma_b one by one in (C2)
// (exact; d^3 per token instead of per group).
//
// A walk is either the token step (chunk = 0) or, with chunk > 0, the chunk form's adjoint
// (chunkwise_adjoint.hpp: the group's tokens in chunks of `chunk`, cut at the refresh, each started from the
// tape's state before it): the structure a GPU backward of matrix products over groups would have.
//
// Covered: the default gain (alpha_hat = unit(A_t k_hat), the "vla" preset), rank 1, u from W_u
// (PenaltySource::Projection), A updated (fixed_A off), with or without key normalisation, both guard
// policies (with chunk walks: eps <= 1, where the guard cannot fire), any refresh period (eta I is
// constant: it does not enter F_t). Anything else is refused, naming the option.
#include "core/rules/vla/adjoint.hpp"
#include "core/rules/vla/chunkwise_adjoint.hpp"
#include "core/rules/vla/forward.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace vla {

// What the group-parallel backward saw, for the tests and the doc's counts.
struct GroupBackwardStats {
  int groups = 0;
  int clamped_tokens = 0;  // tokens whose delta was clamped to eps (Alg. 1 line 13)
  int skipped_tokens = 0;  // tokens whose update was skipped (spec 001's policy)
  int clamped_groups = 0;  // groups whose (C2) step applied the token maps one by one
};

namespace detail {

// The per-token quantities R_g and Phi_g are made of, recomputed from the inputs and the tape by the
// formulas of adjoint.hpp (so that they are the maps its step applies).
template <class T> struct VlaTokenMaps {
  enum class Guard { None, Clamped, Skipped };
  Vec<T> k_hat, alpha;  // M_t = I - alpha k_hat^T
  Vec<T> zv, u;         // F_t = I - zv u^T / delta
  T delta;
  Guard guard = Guard::None;
};

template <class P> class VlaTokenMapper {
 public:
  using T = typename P::compute_t;
  using Tape = typename VlaRule<P>::State::Tape;

  VlaTokenMapper(const VlaOptions& vo, int d, const HeadSequence<T>& x, const Tape& tp)
      : vo_(vo),
        x_(x),
        tp_(tp),
        A0_(Mat<T>::Identity(d, d) * T(T(1) / T(vo.penalty.lambda0))),  // as Adjoint's A0
        scale_(std::isnan(vo.penalty_scale) ? T(T(1) / T(std::sqrt(double(d)))) : T(vo.penalty_scale)),
        eps_(T(vo.penalty.eps)) {}

  VlaTokenMaps<T> operator()(int t) const {
    using std::abs;
    VlaTokenMaps<T> m;
    const Vec<T> k_feat = elu_plus_one(Vec<T>(x_.k.row(t).transpose()));
    m.k_hat = vo_.normalise_key ? unit(k_feat) : k_feat;
    m.alpha = unit(Vec<T>(tp_.A[t] * m.k_hat));
    const Mat<T>& A_prev = t ? tp_.A[t - 1] : A0_;
    m.u = unit(Vec<T>(x_.u.row(t).transpose())) * scale_;
    m.zv = A_prev * m.u;
    m.delta = T(1) + m.u.dot(m.zv);
    if (vo_.penalty.policy == DeltaPolicy::Clamp) {
      if (!(m.delta >= eps_)) m.guard = VlaTokenMaps<T>::Guard::Clamped;
    } else if (abs(m.delta) < eps_) {
      m.guard = VlaTokenMaps<T>::Guard::Skipped;
    }
    return m;
  }

  const T& eps() const { return eps_; }

 private:
  const VlaOptions& vo_;
  const HeadSequence<T>& x_;
  const Tape& tp_;
  const Mat<T> A0_;
  const T scale_, eps_;
};

// One token's map of the symmetric cotangent of A (C2 applied token by token): the adjoint step's
// dA_{t-1} = dA_t + dzv u^T with dzv = -(dA + dA^T) zv / dl [+ ddelta u], symmetrised.
template <class T> void sigma_token_map(const VlaTokenMaps<T>& m, const T& eps, Mat<T>& Sigma) {
  using Guard = typename VlaTokenMaps<T>::Guard;
  if (m.guard == Guard::Skipped) return;  // no update: F_t = I
  const Vec<T> w = Sigma * m.zv;
  if (m.guard == Guard::Clamped) {  // dl = eps, no ddelta term: not a congruence
    Sigma.noalias() -= (w * m.u.transpose() + m.u * w.transpose()) / eps;
    return;
  }
  // F^T Sigma F = Sigma - (w u^T + u w^T) / delta + u (zv^T w) u^T / delta^2
  const T c = m.zv.dot(w) / (m.delta * m.delta);
  Sigma.noalias() -= (w * m.u.transpose() + m.u * w.transpose()) / m.delta;
  Sigma.noalias() += c * (m.u * m.u.transpose());
}

}  // namespace detail

// dL/d of every input of x from dO (n, d_h) = dL/do_t and the forward's tape (head_forward), as
// head_backward computes them, by the passes (B1)-(B3), (C1)-(C2) over groups of `group_tokens` tokens;
// chunk > 0 walks each group in chunks of that many tokens by the chunk form's adjoint.
template <class P>
HeadGrads<typename P::compute_t> group_parallel_head_backward(const VlaRule<P>& rule, const HeadSequence<typename P::compute_t>& x,
                                                              const typename VlaRule<P>::State::Tape& tape,
                                                              const Mat<typename P::compute_t>& dO, int group_tokens,
                                                              GroupBackwardStats* stats = nullptr, int chunk = 0) {
  using T = typename P::compute_t;
  static_assert(std::is_same_v<T, typename P::storage_t>, "the reverse pass runs in one scalar type: storage = compute");
  using Adj = Adjoint<VlaRule<P>>;
  using Carry = typename Adj::Carry;
  using Guard = typename detail::VlaTokenMaps<T>::Guard;
  const VlaOptions& vo = rule.options();
  if (group_tokens < 1)
    throw std::invalid_argument(fmt::format("group_tokens: the tokens per group must be >= 1, got {}", group_tokens));
  if (vo.gain != VlaGain::UnitPost)
    throw std::invalid_argument("gain: the group-parallel backward covers the default gain alpha_hat = unit(A_t k_hat) only (the 'vla' preset)");
  if (vo.penalty.rank != 1)
    throw std::invalid_argument(fmt::format("rank: the group-parallel backward covers rank 1 penalties only, got {}", vo.penalty.rank));
  if (vo.penalty_source != PenaltySource::Projection)
    throw std::invalid_argument("penalty_source: the group-parallel backward covers u = unit(W_u k_raw) / sqrt(d_h) only");
  if (vo.fixed_A) throw std::invalid_argument("fixed_A: the group-parallel backward covers the updated penalty inverse only");
  if (vo.memory.renormalise) throw std::invalid_argument("renormalise_S: S renormalisation has no backward");
  if (chunk < 0) throw std::invalid_argument(fmt::format("chunk: the chunk walk's tokens per chunk must be >= 1 (0: token walks), got {}", chunk));
  if (chunk > 0) check_chunkwise_adjoint_options(vo, "the group-parallel backward with chunk walks");
  const int n = static_cast<int>(x.q.rows()), d = static_cast<int>(x.q.cols());
  for (const Mat<T>* m : {&x.k, &x.v, &x.u, &dO})
    if (m->rows() != n || m->cols() != d) throw std::invalid_argument(fmt::format("x, dO: q, k, v, u_raw and dO must all be ({}, {})", n, d));
  if (int(tape.S.size()) != n || int(tape.z.size()) != n || int(tape.A.size()) != n)
    throw std::invalid_argument(fmt::format("tape: expected {} entries of S, z and A (head_forward's tape of x)", n));

  HeadGrads<T> g(n, d, VlaRule<P>::needs.gate_rows(d));
  GroupBackwardStats st;
  if (n == 0) {
    if (stats) *stats = st;
    return g;
  }
  const int groups = (n + group_tokens - 1) / group_tokens;
  auto begin = [&](int j) { return j * group_tokens; };
  auto end = [&](int j) { return std::min(n, (j + 1) * group_tokens); };
  const detail::VlaTokenMapper<P> maps(vo, d, x, tape);
  const Mat<T> I = Mat<T>::Identity(d, d);
  const Carry zero{Mat<T>::Zero(d, d), Vec<T>::Zero(d), Mat<T>::Zero(d, d)};
  Adj adj(rule, d);
  HeadGrads<T> discard(n, d, VlaRule<P>::needs.gate_rows(d));  // rows the walks of (B1), (B2) write, unused

  // The group's tokens walked backwards from `from` through the sequential step, or chunk by chunk through
  // the chunk form's adjoint; the carry it leaves.
  const VlaFeatures<T> features = chunk > 0 ? vla_features<T>(x.q, x.k, x.u, vo) : VlaFeatures<T>{};
  const Mat<T> A0 = I * T(T(1) / T(vo.penalty.lambda0));  // as InversePenaltyTracker::reset
  auto walk = [&](int j, const Carry& from, HeadGrads<T>& out) {
    if (chunk == 0) {
      adj.set_carry(from);
      for (int t = end(j) - 1; t >= begin(j); --t) adj.step(t, x, tape, dO, out);
      return adj.carry();
    }
    std::vector<std::pair<int, int>> chunks;  // (first token, length), cut as vla_chunked cuts
    for (int c0 = begin(j); c0 < end(j); c0 += chunks.back().second)
      chunks.emplace_back(c0, static_cast<int>(vla_chunk_length(c0, end(j), chunk, vo.penalty.refresh_period)));
    const VlaChunkAdjointInputs<T> inputs = chunk_adjoint_inputs(features, x, dO, vo);
    VlaChunkCarry<T> c{from.dS, from.dz, from.dA};
    for (auto it = chunks.rbegin(); it != chunks.rend(); ++it) {
      const int c0 = it->first;
      c = vla_chunk_adjoint(inputs, c0, it->second, c0 ? Mat<T>(tape.A[c0 - 1]) : A0, c0 ? Mat<T>(tape.S[c0 - 1]) : Mat<T>(Mat<T>::Zero(d, d)),
                            c0 ? Vec<T>(tape.z[c0 - 1]) : Vec<T>(Vec<T>::Zero(d)), c, out);
    }
    return Carry{c.dS, c.dz, c.dA};
  };

  // (B1) every group from (0, 0, 0): dS^0_a, dz^0_a; R_g = M_{b-1} ... M_a (the carry is multiplied on the
  // right by the later token's M first). The first group's are never read: what leaves it is the adjoint
  // of the state before the sequence.
  std::vector<Carry> c0(groups);
  std::vector<Mat<T>> R(groups);
  for (int j = 1; j < groups; ++j) {
    c0[j] = walk(j, zero, discard);
    R[j] = I;
    for (int t = end(j) - 1; t >= begin(j); --t) {
      const auto m = maps(t);
      R[j].noalias() -= (R[j] * m.alpha) * m.k_hat.transpose();
    }
  }

  // (C1) dS and dz entering every group (at its end b), from the last group back.
  std::vector<Carry> in(groups, zero);  // in[j]: the carry the sequential pass holds before token end(j) - 1
  for (int j = groups - 1; j > 0; --j) {
    in[j - 1].dS = in[j].dS * R[j] + c0[j].dS;
    in[j - 1].dz = in[j].dz + c0[j].dz;
  }

  // (B2) every group from (dS_b, dz_b, 0): dA^0_a; Phi_g = F_{b-1} ... F_a, or the token maps themselves where
  // the clamp fired (no congruence to collect them in).
  std::vector<Mat<T>> dA0(groups), Phi(groups);
  std::vector<std::vector<detail::VlaTokenMaps<T>>> clamped_maps(groups);
  for (int j = 0; j < groups; ++j) {
    bool clamped = false;
    std::vector<detail::VlaTokenMaps<T>> token_maps;
    for (int t = end(j) - 1; t >= begin(j); --t) {
      auto m = maps(t);
      if (m.guard == Guard::Skipped) ++st.skipped_tokens;
      if (m.guard == Guard::Clamped) {
        ++st.clamped_tokens;
        clamped = true;
      }
      token_maps.push_back(std::move(m));
    }
    if (j == 0) continue;  // as in (B1): nothing leaving the first group is read
    dA0[j] = walk(j, in[j], discard).dA;
    Phi[j] = I;
    for (const auto& m : token_maps)  // walking order: token b-1 first, multiplied on the right
      if (m.guard == Guard::None) Phi[j].noalias() -= (Phi[j] * m.zv) * (m.u.transpose() / m.delta);
    if (clamped) {
      ++st.clamped_groups;
      clamped_maps[j] = std::move(token_maps);  // in walking order: token b-1 first
    }
  }

  // (C2) the symmetric cotangent of A entering every group, from the last group back.
  for (int j = groups - 1; j > 0; --j) {
    Mat<T> Sigma = in[j].dA;
    if (clamped_maps[j].empty()) {
      Sigma = Phi[j].transpose() * Sigma * Phi[j];
    } else {
      for (const auto& m : clamped_maps[j]) detail::sigma_token_map(m, maps.eps(), Sigma);
    }
    in[j - 1].dA = Sigma + (dA0[j] + dA0[j].transpose()) / T(2);
  }

  // (B3) every group from its true carry: its rows of dq, dk, dv, du.
  for (int j = 0; j < groups; ++j) walk(j, in[j], g);

  st.groups = groups;
  if (stats) *stats = st;
  return g;
}

}  // namespace vla
