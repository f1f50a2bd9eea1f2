#pragma once
// LayerNorm over the feature axis of a (T, d) activation, forward and backward side by side.
//   y = g * (x - mean) * rstd + b,   rstd = 1 / sqrt(var + eps),  var the biased variance (eps = 1e-5).
#include "core/scalar.hpp"

namespace vla::model {

template <class T> struct LayerNormCache {
  Mat<T> xhat;  // (T, d) normalised input
  Vec<T> rstd;  // (T)
};

template <class T> Mat<T> layernorm_forward(const Mat<T>& X, const Mat<T>& g, const Mat<T>& b, LayerNormCache<T>& c) {
  using std::sqrt;
  const int n = static_cast<int>(X.rows()), d = static_cast<int>(X.cols());
  const T eps = T(1e-5);
  c.xhat.resize(n, d);  // (T, d)
  c.rstd.resize(n);     // (T)
  Mat<T> Y(n, d);       // (T, d)
  for (int t = 0; t < n; ++t) {
    const T mean = X.row(t).sum() / T(d);
    const auto xc = (X.row(t).array() - mean).matrix();
    const T var = xc.squaredNorm() / T(d);
    c.rstd(t) = T(1) / T(sqrt(T(var + eps)));
    c.xhat.row(t) = xc * c.rstd(t);
    Y.row(t) = (c.xhat.row(t).array() * g.col(0).transpose().array() + b.col(0).transpose().array()).matrix();
  }
  return Y;
}

// dX = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat . xhat)),  dxhat = dY * g.  Adds into dg, db.
template <class T> Mat<T> layernorm_backward(const Mat<T>& dY, const Mat<T>& g, const LayerNormCache<T>& c, Mat<T>& dg, Mat<T>& db) {
  const int n = static_cast<int>(dY.rows()), d = static_cast<int>(dY.cols());
  Mat<T> dX(n, d);  // (T, d)
  for (int t = 0; t < n; ++t) {
    dg.col(0) += (dY.row(t).array() * c.xhat.row(t).array()).matrix().transpose();
    db.col(0) += dY.row(t).transpose();
    const Vec<T> dxhat = (dY.row(t).transpose().array() * g.col(0).array()).matrix();
    const T m1 = dxhat.sum() / T(d);
    const T m2 = dxhat.dot(c.xhat.row(t).transpose()) / T(d);
    dX.row(t) = ((dxhat.array() - m1 - c.xhat.row(t).transpose().array() * m2) * c.rstd(t)).matrix().transpose();
  }
  return dX;
}

}  // namespace vla::model
