#pragma once
// The state every fast-weight rule of the paper carries (linear attention, DeltaNet, VLA), the read
// they share, and the read's adjoint. The rules differ only in how they WRITE S (eqs. 3, 4, 9); what
// they keep besides (the running key sum z) and how they READ (eq. 11, Alg. 1 lines 24-26) are the
// same, so they live here once, forward and reverse:
//   z_t = z_{t-1} + phi(k_t),   o_t = S_t phi(q_t) / max(phi(q_t)^T z_t, eps).
// z sums the UNnormalised features phi(k_t) for every rule (Alg. 1 line 25), also where S is written
// with unit keys k_hat: that is the paper's read, not a simplification of ours.
#include "core/memory_matrix_manager.hpp"
#include "core/rules/memory_rule.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace vla {

using MemoryOptions = typename MemoryMatrixManager<Precision<double>>::Options;

// The options of a rule whose only hyper-parameters are the read's floor and S's renormalisation
// (linear attention and DeltaNet derive theirs from it; VLA's eps is its penalty's).
struct FastWeightOptions {
  double eps = 1e-4;     // floor of the read's denominator, eq. (11)
  MemoryOptions memory;  // S renormalisation, off by default (001)
  void validate() const {
    if (!(eps > 0.0) || !std::isfinite(eps))
      throw std::invalid_argument(fmt::format("eps: must be a finite number > 0, got {}", eps));
    memory.validate();
  }
};

// Eq. (11) / Alg. 1 lines 24-26: o = S phi(q) / max(phi(q)^T z, eps), with z = sum_{s<=t} phi(k_s).
// A normaliser that is not finite (phi(q)^T z overflowed, or NaN) gives o = NaN: S phi(q) / inf would
// be a silent 0 (core/rules/non_finite.hpp).
template <class C>
inline Vec<C> normalised_read(const Mat<C>& S, const Vec<C>& q_feat, const Vec<C>& z, const C& eps) {
  // max(dot, eps) written so that a NaN denominator stays NaN (std::max would hide it).
  const C dot = q_feat.dot(z);
  const C den = dot < eps ? eps : dot;
  if (!is_finite(den)) return Vec<C>::Constant(q_feat.size(), scalar_cast<C>(std::numeric_limits<double>::quiet_NaN()));
  return (S * q_feat) / den;
}

// The adjoint of the read above, from the raw query: o = S q_feat / den, den = max(q_feat . z, eps),
// q_feat = phi(q_raw). Adds into dS (d_h, d_h) and dz (d_h); returns dL/dq_raw (d_h).
template <class T>
Vec<T> read_backward(const Mat<T>& S, const Vec<T>& q_raw, const Vec<T>& z, const T& eps, const Vec<T>& dout,
                     Mat<T>& dS, Vec<T>& dz) {
  const Vec<T> q_feat = elu_plus_one(q_raw);
  const T dot = q_feat.dot(z);
  const bool floored = dot < eps;  // the floor is constant in q and z: no gradient through den
  const T den = floored ? eps : dot;
  dS.noalias() += dout * q_feat.transpose() / den;
  Vec<T> dq_feat = S.transpose() * dout / den;
  if (!floored) {
    const T gden = -dout.dot(S * q_feat) / (den * den);
    dq_feat += gden * z;
    dz += gden * q_feat;
  }
  return dq_feat.binaryExpr(q_raw, [](const T& g, const T& x) { return T(g * elu_plus_one_grad(x)); });
}

// What the reverse pass keeps of every step t of one sequence (core/model/head_tape.hpp says why
// stored): S_t and z_t.
template <class T> struct NormalisedTape {
  std::vector<Mat<T>> S;  // n entries, (d_h, d_h): S_t after step t
  std::vector<Vec<T>> z;  // n entries, (d_h): z_t = sum_{s<=t} phi(k_s)
  void reserve(int n) {   // one allocation per tape, not a reallocation cascade per step
    S.reserve(n);
    z.reserve(n);
  }
};

template <class P> struct NormalisedMemory {
  using storage_t = typename P::storage_t;
  using compute_t = typename P::compute_t;
  using Tape = NormalisedTape<storage_t>;

  MemoryMatrixManager<P> memory;  // S: (B, d, d), (d_v, d_k) per sequence
  std::vector<Vec<storage_t>> z;  // (B, d) running sum of phi(k_s), s <= t

  NormalisedMemory(int batch, int d, const MemoryOptions& opt)
      : memory(batch, d, d, typename MemoryMatrixManager<P>::Options{opt.renormalise, opt.renorm_threshold}),
        z(batch, Vec<storage_t>::Zero(d)) {}

  // The step's record for sequence b after a write of S_t (when a record is asked for): ||S_t||_F, the
  // write's residual norm and renormalisation, and the linear map the write applied (WriteRecord).
  void record_write(StepRecord<compute_t>* rec, int b, const typename MemoryMatrixManager<P>::WriteResult& wr,
                    WriteRecord<compute_t> map) const {
    if (!rec) return;
    StepStats s;
    s.S_fro = memory.frobenius_norm(b);
    s.e_norm = wr.e_norm;
    s.renormalised = wr.renormalised;
    rec->stats[b] = s;
    rec->writes[b] = std::move(map);
  }

  // Alg. 1 lines 24-26 for sequence b, called after the rule has written S_t: adds k_feat = phi(k_t)
  // to z and returns o_t, computed in the compute type from the stored (storage-type) S_t and z_t.
  Vec<storage_t> accumulate_and_read(int b, const Vec<compute_t>& k_feat, const Vec<storage_t>& q, const compute_t& eps) {
    using C = compute_t;
    z[b] = cast_vector<storage_t>(Vec<C>(cast_vector<C>(z[b]) + k_feat));
    const Vec<C> q_feat = elu_plus_one(cast_vector<C>(q));
    return cast_vector<storage_t>(normalised_read(cast_matrix<C>(memory.S(b)), q_feat, cast_vector<C>(z[b]), eps));
  }

  // Appends this step's S_t, z_t of sequence 0 (the reverse pass runs one sequence at a time).
  void record(Tape& tp) const {
    tp.S.push_back(memory.S(0));
    tp.z.push_back(z[0]);
  }
};

// The part of a step's adjoint every normalised-memory rule shares: the read (line 26), z (line 25)
// and the key's feature map (line 8); the rule adds the adjoint of its write in between. Carries
// dS = dL/dS_t and dz = dL/dz_t from step t to t - 1.
template <class T> class NormalisedAdjoint {
 protected:
  NormalisedAdjoint(int d, const T& eps) : eps_(eps), dS(Mat<T>::Zero(d, d)), dz(Vec<T>::Zero(d)) {}

  // Row t of dq and dk. write(k_feat, dk_feat) is the rule's write adjoint: it reads dS (the read's
  // share added), writes row t of dv (and du, dg), turns dS into dL/dS_{t-1} in place after its last
  // read, and adds its key gradient into dk_feat = dL/dphi(k_t), which arrives holding z's share.
  template <class Write>
  void step(int t, const HeadSequence<T>& x, const NormalisedTape<T>& tp, const Mat<T>& dO, HeadGrads<T>& g, Write&& write) {
    g.dq.row(t) = read_backward<T>(tp.S[t], Vec<T>(x.q.row(t).transpose()), tp.z[t], eps_, Vec<T>(dO.row(t).transpose()), dS, dz).transpose();
    const Vec<T> k_raw = x.k.row(t).transpose();
    const Vec<T> k_feat = elu_plus_one(k_raw);
    Vec<T> dk_feat = dz;  // z_t = z_{t-1} + k_feat (line 25)
    write(k_feat, dk_feat);
    g.dk.row(t) = dk_feat.binaryExpr(k_raw, [](const T& gg, const T& kr) { return T(gg * elu_plus_one_grad(kr)); }).transpose();
  }

  T eps_;     // the read's floor, eq. (11)
  Mat<T> dS;  // dL/dS_t, carried backwards and updated in place (no (d_h, d_h) allocation per step)
  Vec<T> dz;  // dL/dz_t
};

}  // namespace vla
