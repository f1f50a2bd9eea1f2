#include "core/layers/single_head_weights.hpp"

#include "core/rules/registry.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace vla {

namespace {

// "<label>: '<where>'", or the label alone when the array has no name of its own.
std::string named(std::string_view label, const std::string& where) {
  return where.empty() ? std::string(label) : fmt::format("{}: '{}'", label, where);
}

// The array `a` as a (rows, cols) matrix of finite values.
Mat<double> matrix(const NamedArray& a, long rows, long cols, std::string_view label) {
  Mat<double> m = a.data;
  // A (1, n) matrix may also be given as a 1-D array of length n.
  if (a.ndim == 1 && rows == 1) m.transposeInPlace();
  if (m.rows() != rows || m.cols() != cols)
    throw std::invalid_argument(
        fmt::format("{} has shape ({}, {}), expected ({}, {})", named(label, a.where), m.rows(), m.cols(), rows, cols));
  if (!all_finite(m)) throw std::invalid_argument(fmt::format("{} contains a non-finite value", named(label, a.where)));
  return m;
}

// The bias `name` of length n (1-D, or 2-D with one row or column); absent = zero (empty).
Vec<double> bias(const ArrayLookup& get, const std::string& name, long n, std::string_view label) {
  const auto a = get(name, false);
  if (!a) return {};
  if (a->data.size() != n || (a->data.rows() != 1 && a->data.cols() != 1))
    throw std::invalid_argument(fmt::format("{} has shape ({}, {}), expected a vector of length {}", named(label, a->where),
                                            a->data.rows(), a->data.cols(), n));
  Vec<double> v = Eigen::Map<const Vec<double>>(a->data.data(), n);
  if (!all_finite(v)) throw std::invalid_argument(fmt::format("{} contains a non-finite value", named(label, a->where)));
  return v;
}

}  // namespace

void check_layer_input(const NamedArray& X, std::string_view label) {
  if (X.ndim != 2 || X.data.rows() < 1 || X.data.cols() < 1)
    throw std::invalid_argument(fmt::format("{} must be a 2-D array (T, d_model) with T, d_model >= 1, got {}-D ({}, {})",
                                            named(label, X.where), X.ndim, X.data.rows(), X.data.cols()));
  if (!all_finite(X.data)) throw std::invalid_argument(fmt::format("{} contains a non-finite value", named(label, X.where)));
}

SingleHeadWeights single_head_weights(const MixerConfig& cfg, long d_model, const ArrayLookup& get, std::string_view label,
                                      std::string_view input_label) {
  const Needs needs = rule_needs(cfg);  // which projections the rule reads; throws naming --mixer
  const NamedArray wq = *get("Wq", true);
  if (wq.ndim != 2 || wq.data.rows() < 1)
    throw std::invalid_argument(fmt::format("{} must be 2-D (d_head, d_model)", named(label, wq.where)));
  const long d_head = wq.data.rows();
  if (wq.data.cols() != d_model)
    throw std::invalid_argument(fmt::format("{} has shape ({}, {}) but {} has d_model = {} columns; expected ({}, {})",
                                            named(label, wq.where), wq.data.rows(), wq.data.cols(), input_label, d_model, d_head,
                                            d_model));
  const int r = cfg.penalty.rank;
  SingleHeadWeights out{{int(d_model), int(d_head), 1, r}, {}};
  auto& w = out.w;
  const auto required = [&](const std::string& name, long rows, long cols) { return matrix(*get(name, true), rows, cols, label); };
  w.Wq = matrix(wq, d_head, d_model, label);
  w.Wk = required("Wk", d_head, d_model);
  w.Wv = required("Wv", d_head, d_model);
  w.Wo = required("Wo", d_model, d_head);
  w.bq = bias(get, "bq", d_head, label);
  w.bk = bias(get, "bk", d_head, label);
  w.bv = bias(get, "bv", d_head, label);
  w.bo = bias(get, "bo", d_model, label);
  if (needs.penalty) {
    w.Wu = required("Wu", r * d_head, d_head);
    w.bu = bias(get, "bu", r * d_head, label);
  }
  if (needs.gate) {
    const int g = needs.gate_rows(int(d_head));
    const auto wg = get("Wg", false);
    w.Wg = wg ? matrix(*wg, g, d_model, label) : Mat<double>::Zero(g, d_model);
    w.bg = bias(get, "bg", g, label);
  }
  return out;
}

}  // namespace vla
