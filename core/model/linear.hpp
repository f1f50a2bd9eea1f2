#pragma once
// Affine map on a (T, d_in) activation: Y = X W^T + b^T, W (d_out, d_in), b (d_out, 1) or empty.
#include "core/scalar.hpp"

namespace vla::model {

template <class T> Mat<T> linear_forward(const Mat<T>& X, const Mat<T>& W, const Mat<T>& b) {
  Mat<T> Y = X * W.transpose();  // (T, d_out)
  if (b.size()) Y.rowwise() += b.col(0).transpose();
  return Y;
}

// dX = dY W; dW += dY^T X; db += column sums of dY.
template <class T> Mat<T> linear_backward(const Mat<T>& dY, const Mat<T>& X, const Mat<T>& W, Mat<T>& dW, Mat<T>& db) {
  dW.noalias() += dY.transpose() * X;
  if (db.size()) db.col(0) += dY.colwise().sum().transpose();
  return dY * W;  // (T, d_in)
}

}  // namespace vla::model
