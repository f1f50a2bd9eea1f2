#pragma once
// Variational Linear Attention, Algorithm 1 of the paper (eqs. 9-11), and its named variants.
//
// Per token, for each sequence b (Alg. 1 line numbers):
//   k_feat = phi(k_raw)                         (8)    phi = ELU + 1
//   k_hat  = k_feat / ||k_feat||                (9)    [normalise_key = false: k_hat <- k_feat]
//   u      = L2norm(W_u k_raw) / sqrt(d_h)      (10)   [PenaltySource::Key: u = k_hat / sqrt(d_h)]
//   A_t    = SM(A_{t-1}, u), refresh            (12-17) InversePenaltyTracker
//   alpha  = A_t k_hat, alpha_hat = unit(alpha) (19-20) [Gain selects the variant, below]
//   e      = v - S k_hat, S += e alpha_hat^T    (21-22) MemoryMatrixManager
//   z     += k_feat,  o = S phi(q) / max(z^T phi(q), eps)   (24-26)
//
// Variants (paper Tables 2, 4, 5 and spec 001), all options of this one rule:
//   "vla"          VLAv3, Algorithm 1.
//   "vla-v2"       unnormalised: k_hat <- k_feat and alpha <- A_t k_feat (Table 2 left column).
//   "vla-rls"      classical RLS gain alpha = A_{t-1} k_hat / (1 + k_hat^T A_{t-1} k_hat) (Table 5).
//   "vla-fixed-a"  A_t = A_0 for all t, no Sherman-Morrison (Table 4).
//   "vla-no-knorm" no key normalisation, alpha still unit (Table 4).
//   rank r         penalty.rank = r: W_u gives r directions, each normalised as line 10 (Woodbury).
#include "core/inverse_penalty_tracker.hpp"
#include "core/rules/mixer_config.hpp"
#include "core/rules/normalised_memory.hpp"

#include <fmt/ranges.h>

#include <array>
#include <cmath>
#include <string>

namespace vla {

enum class VlaGain {
  UnitPost,  // alpha_hat = A_t k / ||A_t k||                         (VLAv3, eq. 20)
  RawPost,   // alpha = A_t k                                        (VLAv2)
  RlsPrior,  // alpha = A_{t-1} k / max(1 + k^T A_{t-1} k, eps)       (classical RLS, Table 5)
};
enum class PenaltySource {
  Projection,  // u from W_u k_raw (Alg. 1 line 10)
  Key,         // u from k_hat itself: the RLS / whitening regime of Sec. 7.1
};

struct VlaOptions {
  PenaltyOptions penalty;  // lambda0, eps, delta policy, refresh, rank
  bool normalise_key = true;
  VlaGain gain = VlaGain::UnitPost;
  bool fixed_A = false;
  PenaltySource penalty_source = PenaltySource::Projection;
  // u = unit(.) * penalty_scale; NaN means Alg. 1's 1/sqrt(d_h).
  double penalty_scale = std::numeric_limits<double>::quiet_NaN();
  MemoryOptions memory;

  void validate() const {
    penalty.validate();
    memory.validate();
    if (!std::isnan(penalty_scale) && !(penalty_scale >= 0.0 && std::isfinite(penalty_scale)))
      throw std::invalid_argument(fmt::format("penalty_scale: must be finite and >= 0, got {}", penalty_scale));
  }

  // The named variants (Tables 2, 4, 5), the mixer names of this rule.
  static constexpr std::array<std::string_view, 5> kVariants{"vla", "vla-v2", "vla-rls", "vla-fixed-a", "vla-no-knorm"};

  // Named variants; throws naming the allowed ones.
  static VlaOptions preset(const std::string& variant) {
    VlaOptions o;
    if (variant == "vla") return o;
    if (variant == "vla-v2") { o.normalise_key = false; o.gain = VlaGain::RawPost; return o; }
    if (variant == "vla-rls") { o.gain = VlaGain::RlsPrior; return o; }
    if (variant == "vla-fixed-a") { o.fixed_A = true; return o; }
    if (variant == "vla-no-knorm") { o.normalise_key = false; return o; }
    throw std::invalid_argument(fmt::format("variant: unknown VLA variant '{}' (allowed: {})", variant, fmt::join(kVariants, ", ")));
  }
};

template <class P> class VlaRule : public RuleOptions<VlaOptions> {
 public:
  using storage_t = typename P::storage_t;
  using compute_t = typename P::compute_t;
  static constexpr auto names = VlaOptions::kVariants;  // the mixer names: one per variant
  static constexpr Needs needs{.penalty = true, .gate = false};
  static constexpr bool recurrent = true;

  struct State : NormalisedMemory<P> {  // S and z, plus:
    InversePenaltyTracker<P> tracker;    // A: (B, d, d)

    // The reverse pass needs A_t as well (Alg. 1 lines 12-19); core/model/head_tape.hpp says why it
    // is stored rather than recomputed.
    struct Tape : NormalisedMemory<P>::Tape {
      std::vector<Mat<storage_t>> A;  // n entries, (d_h, d_h): A_t after step t
      void reserve(int n) {
        NormalisedMemory<P>::Tape::reserve(n);
        A.reserve(n);
      }
    };
    void record(Tape& tp) const {
      NormalisedMemory<P>::record(tp);
      tp.A.push_back(tracker.A(0));
    }
  };

  using RuleOptions::RuleOptions;
  // cfg.mixer names the variant; the penalty and memory knobs are the command line's.
  static VlaRule from_config(const MixerConfig& cfg) {
    VlaOptions o = VlaOptions::preset(cfg.mixer);
    o.penalty = cfg.penalty;
    o.memory = MemoryOptions{cfg.renormalise_S, cfg.renorm_threshold};
    return VlaRule(o);
  }

  State init(int batch, int d) const {
    return State{NormalisedMemory<P>(batch, d, opt_.memory), InversePenaltyTracker<P>(batch, d, opt_.penalty)};
  }

  void step(State& st, const HeadInputs<storage_t>& in, Mat<storage_t>& out, StepRecord<compute_t>* rec) const {
    using C = compute_t;
    const auto [B, d] = begin_step(in, out, rec);
    const int r = opt_.penalty.rank;
    const C eps = scalar_cast<C>(opt_.penalty.eps);
    const C scale = std::isnan(opt_.penalty_scale) ? C(C(1) / C(std::sqrt(double(d))))
                                                    : scalar_cast<C>(opt_.penalty_scale);
    for (int b = 0; b < B; ++b) {
      const Vec<C> k_raw = cast_vector<C>(Vec<storage_t>(in.k.col(b)));
      const Vec<C> k_feat = elu_plus_one(k_raw);                              // line 8
      const Vec<C> k_hat = opt_.normalise_key ? unit(k_feat) : k_feat;       // line 9

      // Penalty directions U (d x r), line 10; column j is unit(W_u k_raw)_j / sqrt(d_h).
      Mat<C> U(d, r);
      if (opt_.penalty_source == PenaltySource::Key) {
        U = (unit(k_feat) * scale).replicate(1, r);
      } else {
        const Vec<C> u_raw = cast_vector<C>(Vec<storage_t>(in.u.col(b)));
        for (int j = 0; j < r; ++j) U.col(j) = unit(Vec<C>(u_raw.segment(j * d, d))) * scale;
      }

      // Classical RLS reads A_{t-1}, before the update (Table 5).
      Vec<C> alpha;
      if (opt_.gain == VlaGain::RlsPrior) {
        const Vec<C> Ak = st.tracker.apply(b, k_hat);
        const C den = C(1) + k_hat.dot(Ak);
        alpha = Ak / (den < eps ? eps : den);
      }
      typename InversePenaltyTracker<P>::UpdateResult upd{kNotApplicable, false};
      if (!opt_.fixed_A) upd = st.tracker.update(b, U);                     // lines 12-17
      if (opt_.gain != VlaGain::RlsPrior) {
        alpha = st.tracker.apply(b, k_hat);                                  // line 19 (post-update A)
        if (opt_.gain == VlaGain::UnitPost) alpha = unit(alpha);             // line 20
      }
      const auto w = st.memory.residual_write(b, k_hat, alpha, cast_vector<C>(Vec<storage_t>(in.v.col(b))));  // 21-22

      out.col(b) = st.accumulate_and_read(b, k_feat, Vec<storage_t>(in.q.col(b)), eps);  // 24-26

      if (rec) {
        rec->stats[b] = StepStats{st.memory.frobenius_norm(b), st.tracker.frobenius_norm(b), upd.delta,
                                  w.e_norm, upd.guard_fired, w.renormalised};
        rec->writes[b] = WriteRecord<C>{k_hat, alpha, C(1)};
      }
    }
    st.tracker.advance();
  }
};

}  // namespace vla
