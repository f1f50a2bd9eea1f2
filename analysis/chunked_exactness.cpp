#include "analysis/chunked_exactness.hpp"

#include "core/feature_map.hpp"
#include "core/rules/additive_chunked.hpp"
#include "core/rules/delta_chunked.hpp"
#include "core/rules/delta/rule.hpp"
#include "core/rules/deltanet/rule.hpp"
#include "core/rules/falcon2/chunked.hpp"
#include "core/rules/falcon2/rule.hpp"
#include "core/rules/falcon2a/rule.hpp"
#include "core/rules/gated_deltanet/rule.hpp"
#include "core/rules/gla/chunked.hpp"
#include "core/rules/gla/rule.hpp"
#include "core/rules/linear/rule.hpp"
#include "core/rules/mamba2/rule.hpp"
#include "core/rules/metala/rule.hpp"
#include "core/rules/retnet/rule.hpp"
#include "core/rules/vla/chunked.hpp"
#include "core/rules/vla/penalty_chain.hpp"
#include "core/rules/vla/rule.hpp"

#include <Eigen/Eigenvalues>
#include <Eigen/SVD>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>
#include <random>
#include <stdexcept>

namespace vla::analysis {

HeadStream chunk_test_stream(int d, int T, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> n(0.0, 1.0);
  HeadStream s;
  s.d = d;
  s.T = T;
  s.q.resize(d, T); s.k.resize(d, T); s.v.resize(d, T);
  for (auto* m : {&s.q, &s.k, &s.v})
    for (auto& e : m->reshaped()) e = n(gen);
  s.gate.resize(1, T);
  for (auto& e : s.gate.reshaped()) e = 2.0 + n(gen);
  s.u.resize(d, T);  // VLA's W_u k; drawn after the others, so that their inputs do not depend on it
  for (auto& e : s.u.reshaped()) e = n(gen);
  Mat<double> more(std::max(d, 2) - 1, T);  // the wider gates' other logits, drawn last for the same reason
  for (auto& e : more.reshaped()) e = 2.0 + n(gen);
  s.gate.conservativeResize(std::max(d, 2), T);
  s.gate.bottomRows(more.rows()) = more;
  return s;
}

namespace {
void check_rule(const std::string& rule) {
  for (const auto& r : kChunkedRules)
    if (r == rule) return;
  throw std::invalid_argument(fmt::format("rule: the chunkwise forms cover {}; got '{}'", fmt::join(kChunkedRules, ", "), rule));
}

// phi applied row by row ((T, d) tokens as rows).
template <class T> Mat<T> phi_rows(const Mat<T>& x) { return x.unaryExpr([](const T& a) { return elu_plus_one(a); }); }
}  // namespace

template <class T> Mat<T> chunked_outputs(const std::string& rule, const HeadStream& s, int chunk) {
  check_rule(rule);
  // Tokens as rows, rounded to T once (the recurrent rule stores its inputs so).
  const Mat<T> q = cast_matrix<T>(Mat<double>(s.q.transpose())), k = cast_matrix<T>(Mat<double>(s.k.transpose())),
               v = cast_matrix<T>(Mat<double>(s.v.transpose()));
  Vec<T> gate(s.T);
  for (int t = 0; t < s.T; ++t) gate(t) = sigmoid(scalar_cast<T>(s.gate(0, t)));
  const T eps = scalar_cast<T>(FastWeightOptions{}.eps);
  if (rule == "linear")  // eq. 3: phi features, undecayed, normalised read
    return additive_chunked<T>(phi_rows(q), phi_rows(k), v, Vec<T>::Ones(s.T), chunk, true, eps).O;
  if (rule == "retnet")  // constant decay, raw q and k
    return additive_chunked<T>(q, k, v, Vec<T>::Constant(s.T, scalar_cast<T>(RetNetOptions{}.gamma)), chunk, false, T(0)).O;
  if (rule == "mamba2")  // gamma_t = sigmoid(g_t)
    return additive_chunked<T>(q, k, v, gate, chunk, false, T(0)).O;
  if (rule == "vla") {  // Algorithm 1 (core/rules/vla/chunked.hpp)
    const VlaOptions opt;
    const Mat<T> u = cast_matrix<T>(Mat<double>(s.u.transpose()));
    return vla_chunked<T>(vla_features<T>(q, k, u, opt), v, opt, chunk).O;
  }
  if (rule == "gla" || rule == "metala") {  // per-channel decays alpha_t = sigmoid(g_t), raw q and k
    const Mat<T> logits = cast_matrix<T>(Mat<double>(s.gate.topRows(s.d).transpose()));
    const Mat<T> alpha = logits.unaryExpr([](const T& g) { return sigmoid(g); });
    if (rule == "gla") return gla_chunked<T>(q, k, v, alpha, chunk).O;
    // MetaLA (seed 002 eq. 2): GLA's chunked form with the key tied to the gate, 1 - alpha_t = sigmoid(-g_t).
    return gla_chunked<T>(q, Mat<T>(logits.unaryExpr([](const T& g) { return sigmoid(T(-g)); })), v, alpha, chunk).O;
  }
  if (rule == "falcon2" || rule == "falcon2a") {  // core/rules/falcon2/chunked.hpp: RMSNorm features, no phi
    // FALCON-2: one gain per value channel from gate rows 0..d-1; FALCON-2A: row 0's for every channel.
    const bool per_channel = rule == "falcon2";
    Mat<T> beta(s.T, s.d);
    for (int t = 0; t < s.T; ++t)
      for (int j = 0; j < s.d; ++j) beta(t, j) = Falcon2Rule<Precision<T>>::gain(scalar_cast<T>(s.gate(per_channel ? j : 0, t)));
    return falcon_chunked<T>(q, k, v, beta, T(per_channel ? 1 : 0), NlmsOptions{}, chunk).O;
  }
  // The delta rules: the write keys are k_hat = unit(phi(k)), the running sum adds phi(k).
  const Mat<T> fk = phi_rows(k);
  Mat<T> k_hat(s.T, s.d);
  for (int t = 0; t < s.T; ++t) k_hat.row(t) = unit(Vec<T>(fk.row(t).transpose())).transpose();
  if (rule == "delta") {  // the classic delta rule: a = c = 1, b = beta_t = 2 sigmoid(g_0) in (0, 2)
    const Vec<T> beta = gate.unaryExpr([](const T& s) { return T(T(2) * s); });
    return delta_chunked<T>(phi_rows(q), k_hat, fk, v, DeltaCoefficients<T>{Vec<T>::Ones(s.T), beta, Vec<T>::Ones(s.T)}, chunk, true, eps).O;
  }
  if (rule == "gated-deltanet") {  // a = c = alpha_t = sigmoid(g_0), b = beta_t = sigmoid(g_1)
    Vec<T> beta(s.T);
    for (int t = 0; t < s.T; ++t) beta(t) = sigmoid(scalar_cast<T>(s.gate(1, t)));
    return delta_chunked<T>(phi_rows(q), k_hat, fk, v, DeltaCoefficients<T>{gate, beta, gate}, chunk, true, eps).O;
  }
  // deltanet (eq. 4): S_t = beta_t S_{t-1} + (v_t - S_{t-1} k_hat_t) k_hat_t^T, a = beta, b = c = 1.
  const DeltaCoefficients<T> w{gate, Vec<T>::Ones(s.T), Vec<T>::Ones(s.T)};
  return delta_chunked<T>(phi_rows(q), k_hat, fk, v, w, chunk, true, eps).O;
}

template <class T> Mat<T> recurrent_outputs(const std::string& rule, const HeadStream& s) {
  check_rule(rule);
  using P = Precision<T>;
  if (rule == "linear") return rule_outputs<T>(LinearAttentionRule<P>(), s);
  if (rule == "retnet") return rule_outputs<T>(RetNetRule<P>(), s);
  if (rule == "mamba2") return rule_outputs<T>(Mamba2Rule<P>(), s);
  if (rule == "vla") return rule_outputs<T>(VlaRule<P>(), s);
  if (rule == "gla") return rule_outputs<T>(GlaRule<P>(), s);
  if (rule == "metala") return rule_outputs<T>(MetaLaRule<P>(), s);
  if (rule == "gated-deltanet") return rule_outputs<T>(GatedDeltaNetRule<P>(), s);
  if (rule == "delta") return rule_outputs<T>(DeltaRule<P>(), s);
  if (rule == "falcon2") return rule_outputs<T>(Falcon2Rule<P>(), s);
  if (rule == "falcon2a") return rule_outputs<T>(Falcon2aRule<P>(), s);
  return rule_outputs<T>(DeltaNetRule<P>(), s);
}

ChunkedExactness chunked_exactness_mp50(const std::string& rule, const HeadStream& s, const std::vector<int>& chunks) {
  const Mat<mp50> truth = recurrent_outputs<mp50>(rule, s);
  ChunkedExactness r{rule, 0.0, 0};
  for (int c : chunks) {
    const double diff = to_double(mp50((chunked_outputs<mp50>(rule, s, c) - truth).norm() / truth.norm()));
    if (diff >= r.max_rel_diff) r = {rule, diff, c};
  }
  return r;
}

VlaChunkedExactness vla_chunked_exactness_mp50(const VlaOptions& opt, const HeadStream& s, const std::vector<int>& chunks) {
  const Mat<mp50> truth = rule_outputs<mp50>(VlaRule<Precision<mp50>>(opt), s);
  auto rows = [](const Mat<double>& m) { return cast_matrix<mp50>(Mat<double>(m.transpose())); };
  const VlaFeatures<mp50> f = vla_features<mp50>(rows(s.q), rows(s.k), rows(s.u), opt);
  VlaChunkedExactness r;
  r.rule = "vla";
  for (int c : chunks) {
    const VlaChunked<mp50> ch = vla_chunked<mp50>(f, rows(s.v), opt, c);
    const double diff = to_double(mp50((ch.O - truth).norm() / truth.norm()));
    if (diff >= r.max_rel_diff) {
      r.max_rel_diff = diff;
      r.worst_chunk = c;
    }
    if (c == *std::max_element(chunks.begin(), chunks.end())) {
      r.chunks = ch.chunks;
      r.guard_fired = ch.guard_fired;
    }
  }
  return r;
}

PenaltyChainExactness penalty_chain_exactness_mp50(const VlaOptions& opt, const HeadStream& s, const std::vector<int>& groups) {
  auto rows = [](const Mat<double>& m) { return cast_matrix<mp50>(Mat<double>(m.transpose())); };
  const Mat<mp50> U = vla_features<mp50>(rows(s.q), rows(s.k), rows(s.u), opt).U;  // (T, d) u_t, line 10
  const std::vector<Mat<mp50>> A_before = tracker_penalties<mp50>(U, opt.penalty);  // the tracker's A before every token
  PenaltyChainExactness r;
  for (int g : groups) {
    const PenaltyChainShape shape{s.T, opt.penalty.refresh_period, g};
    const auto starts = penalty_chain<mp50>(U, shape, scalar_cast<mp50>(opt.penalty.lambda0), scalar_cast<mp50>(opt.penalty.refresh_eta));
    for (std::size_t i = 0; i < starts.size(); ++i) {
      const Mat<mp50>& ref = A_before[i * shape.group_tokens()];
      const double diff = to_double(mp50((starts[i] - ref).norm() / ref.norm()));
      if (diff >= r.max_rel_diff) {
        r.max_rel_diff = diff;
        r.worst_group = g;
      }
      ++r.groups;
    }
  }
  return r;
}

double vla_gram_bound(const VlaOptions& opt, int T, int d, int chunk) {
  const int period = opt.penalty.refresh_period;
  const int n = std::min(period > 0 ? std::min(chunk, period) : chunk, T);
  const int refreshes = period > 0 ? T / period : 0;
  return 1 + (1 / opt.penalty.lambda0 + refreshes * opt.penalty.refresh_eta) * n / d;
}

VlaChunkConditioning vla_chunk_conditioning(const VlaOptions& opt, const HeadStream& s, int chunk) {
  auto rows = [](const Mat<double>& m) { return Mat<double>(m.transpose()); };
  VlaChunkConditioning c;
  c.gram_eig_min = std::numeric_limits<double>::infinity();
  auto cond = [](const Vec<double>& sv) { return sv(0) / sv(sv.size() - 1); };  // singular values, descending
  vla_chunked<double>(vla_features<double>(rows(s.q), rows(s.k), rows(s.u), opt), rows(s.v), opt, chunk,
                      [&](const Mat<double>& G, const Mat<double>& IL) {
                        ++c.chunks;
                        const Eigen::SelfAdjointEigenSolver<Mat<double>> es(G, Eigen::EigenvaluesOnly);
                        c.gram_eig_min = std::min(c.gram_eig_min, es.eigenvalues().minCoeff());
                        c.gram_cond_max = std::max(c.gram_cond_max, es.eigenvalues().maxCoeff() / es.eigenvalues().minCoeff());
                        const Vec<double> sv = Eigen::JacobiSVD<Mat<double>>(IL).singularValues();
                        c.solve_cond_max = std::max(c.solve_cond_max, cond(sv));
                        c.solve_inv_norm_max = std::max(c.solve_inv_norm_max, 1.0 / sv(sv.size() - 1));
                      });
  return c;
}

template Mat<float> chunked_outputs<float>(const std::string&, const HeadStream&, int);
template Mat<double> chunked_outputs<double>(const std::string&, const HeadStream&, int);
template Mat<bfloat16> chunked_outputs<bfloat16>(const std::string&, const HeadStream&, int);
template Mat<mp50> chunked_outputs<mp50>(const std::string&, const HeadStream&, int);
template Mat<float> recurrent_outputs<float>(const std::string&, const HeadStream&);
template Mat<double> recurrent_outputs<double>(const std::string&, const HeadStream&);
template Mat<bfloat16> recurrent_outputs<bfloat16>(const std::string&, const HeadStream&);
template Mat<mp50> recurrent_outputs<mp50>(const std::string&, const HeadStream&);

}  // namespace vla::analysis
