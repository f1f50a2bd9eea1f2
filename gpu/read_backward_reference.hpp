#pragma once
// What the plain CPU reference backwards (gpu/vla_backward_reference.hpp for VLA,
// gpu/delta_backward_reference.hpp for linear attention and DeltaNet) share: the feature map and the
// normalised read, forward and adjoint. Every rule reads its state the same way (VLA eq. 26, linear
// attention eq. 3, DeltaNet eq. 4), so its adjoint is written once here, llm.c style (plain loops
// over row-major (d, d) arrays, templated scalar, double in the tests).
//
// Read, per step t (zs_t = zs_{t-1} + phi(k_raw) is the caller's, eq. 25):
//   qf = phi(q_raw)   r = zs_t.qf, den = r < eps ? eps : r   o = S_t qf / den
// Adjoint (g = do / den; dS, dzs are the adjoints of S_t, zs_t, accumulated):
//   dS += g qf^T;  dqf = S_t^T g;  if den is not clamped (r >= eps):
//   c = -(g.o), dqf += c zs_t, dzs += c qf   (the clamped branch is constant: no gradient)
//   dq_raw = dqf * phi'(q_raw)
#include <cmath>
#include <cstddef>
#include <vector>

namespace vla::gpu::ref {

// phi(x) = elu(x) + 1 (Alg. 1 lines 8, 24) and its derivative.
template <class R> R phi(R x) { return x > R(0) ? x + R(1) : R(std::exp(x)); }
template <class R> R dphi(R x) { return x > R(0) ? R(1) : R(std::exp(x)); }

template <class R> R dot(int d, const R* a, const R* b) {
  R acc = 0;
  for (int i = 0; i < d; ++i) acc += a[i] * b[i];
  return acc;
}

// y = M^T x for a row-major (d, d) M.
template <class R> void matvec_t(int d, const R* M, const R* x, R* y) {
  for (int j = 0; j < d; ++j) {
    R acc = 0;
    for (int i = 0; i < d; ++i) acc += M[std::size_t(i) * d + j] * x[i];
    y[j] = acc;
  }
}

// The read of one step, forward and adjoint, with its scratch vectors (one per sequence).
template <class R> class Read {
 public:
  Read(int d, R eps) : d_(d), eps_(eps), qf_(d), g_(d), dqf_(d) {}

  // o = S_t qf / den from S_t (d, d), zs_t (d), q_raw (d).
  void forward(const R* St, const R* zs, const R* q_raw, R* o) {
    for (int i = 0; i < d_; ++i) qf_[i] = phi(q_raw[i]);
    const R r = dot(d_, zs, qf_.data()), den = r < eps_ ? eps_ : r;
    for (int i = 0; i < d_; ++i) o[i] = dot(d_, &St[std::size_t(i) * d_], qf_.data()) / den;
  }

  // Adds the read's share to dS (d, d) and dzs (d); writes dq_raw (d). o is forward's output, dout
  // the adjoint of o.
  void backward(const R* St, const R* zs, const R* q_raw, const R* o, const R* dout, R* dS, R* dzs, R* dq) {
    const int d = d_;
    for (int i = 0; i < d; ++i) qf_[i] = phi(q_raw[i]);
    const R r = dot(d, zs, qf_.data()), den = r < eps_ ? eps_ : r;
    for (int i = 0; i < d; ++i) g_[i] = dout[i] / den;
    matvec_t(d, St, g_.data(), dqf_.data());
    for (std::size_t x = 0; x < std::size_t(d) * d; ++x) dS[x] += g_[x / d] * qf_[x % d];
    if (!(r < eps_)) {
      const R c = -dot(d, g_.data(), o);
      for (int i = 0; i < d; ++i) { dqf_[i] += c * zs[i]; dzs[i] += c * qf_[i]; }
    }
    for (int i = 0; i < d; ++i) dq[i] = dqf_[i] * dphi(q_raw[i]);
  }

 private:
  int d_;
  R eps_;
  std::vector<R> qf_, g_, dqf_;
};

}  // namespace vla::gpu::ref
