#pragma once
// MemoryMatrixManager (spec 001): the memory S as a batched (B, d_v, d_k) state and the one write
// every linear-attention-family rule performs on it:
//
//   e_t = v_t - S_{t-1} k_read           (prediction residual, eq. 19; e_t = v_t when additive)
//   S_t = decay * S_{t-1} + e_t w^T       (eq. 10 / Alg. 1 line 22 with w = alpha_hat, decay = 1;
//                                          DeltaNet eq. 4 with w = k_read, decay = beta_t;
//                                          linear attention eq. 3 with w = phi(k_t), additive)
//
// Optional renormalisation (default off, 001): when ||S_t||_F exceeds `renorm_threshold`, S_t is
// rescaled to have exactly that norm. Updates are written out of place (S = S + ...), as 001 asks;
// in C++ this matters only for readability, not for autograd.
#include "core/precision.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace vla {

template <class P> class MemoryMatrixManager {
 public:
  using storage_t = typename P::storage_t;
  using compute_t = typename P::compute_t;

  struct Options {
    bool renormalise = false;
    double renorm_threshold = std::numeric_limits<double>::infinity();
    void validate() const {
      if (renormalise && !(renorm_threshold > 0.0))
        throw std::invalid_argument("renorm_threshold: must be > 0 when renormalisation is on");
    }
  };

  MemoryMatrixManager() = default;
  MemoryMatrixManager(int batch, int d_v, int d_k, Options opt = {}) : opt_(opt) {
    opt_.validate();
    S_.assign(batch, Mat<storage_t>::Zero(d_v, d_k));
  }

  int batch() const { return static_cast<int>(S_.size()); }
  const Mat<storage_t>& S(int b) const { return S_[b]; }
  Mat<storage_t>& S(int b) { return S_[b]; }

  // Result of one write for one sequence.
  struct WriteResult {
    double e_norm;
    bool renormalised;
  };

  // Residual write for sequence b; all arithmetic in compute_t, S rounded once to storage_t.
  WriteResult residual_write(int b, const Vec<compute_t>& k_read, const Vec<compute_t>& w,
                             const Vec<compute_t>& v, const compute_t& decay = compute_t(1)) {
    const Mat<compute_t> S_prev = cast_matrix<compute_t>(S_[b]);
    const Vec<compute_t> e = v - S_prev * k_read;
    Mat<compute_t> S_next = decay * S_prev + e * w.transpose();
    const bool renorm = maybe_renormalise(S_next);
    S_[b] = cast_matrix<storage_t>(S_next);
    return {to_double(e.norm()), renorm};
  }

  // Additive write S_t = S_{t-1} + v w^T (linear attention), for sequence b.
  WriteResult additive_write(int b, const Vec<compute_t>& w, const Vec<compute_t>& v) {
    Mat<compute_t> S_next = cast_matrix<compute_t>(S_[b]) + v * w.transpose();
    const bool renorm = maybe_renormalise(S_next);
    S_[b] = cast_matrix<storage_t>(S_next);
    return {to_double(v.norm()), renorm};
  }

  double frobenius_norm(int b) const { return frobenius(S_[b]); }

 private:
  bool maybe_renormalise(Mat<compute_t>& S) const {
    if (!opt_.renormalise) return false;
    const compute_t n = S.norm();
    const compute_t limit = scalar_cast<compute_t>(opt_.renorm_threshold);
    if (!(n > limit)) return false;
    S = S * compute_t(limit / n);
    return true;
  }

  Options opt_;
  std::vector<Mat<storage_t>> S_;  // (B, d_v, d_k)
};

}  // namespace vla
