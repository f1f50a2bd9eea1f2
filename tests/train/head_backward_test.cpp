// The core head backward (core/model/head.hpp: the rules' adjoints, core/rules/<rule>/adjoint.hpp,
// through the reverse loop) against central finite differences of the rules' own forward
// (core/rules/<rule>/forward.hpp through with_rule<Precision<double>>, stepped here independently of
// head.hpp), on raw per-token inputs. Every GPU backward test (tests/gpu/test_recurrent_backward.cpp)
// trusts this function, so it is checked here against an independent forward, input by input.
#include "core/model/head.hpp"
#include "core/rules/registry.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace {

using vla::Mat;

// (T, d) row-major (token t at t*d) as a matrix.
Mat<double> rows(int T, int d, const std::vector<double>& x) {
  Mat<double> m(T, d);
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < d; ++i) m(t, i) = x[std::size_t(t) * d + i];
  return m;
}
std::vector<double> flat(const Mat<double>& m) {
  std::vector<double> x(std::size_t(m.size()));
  for (int t = 0; t < m.rows(); ++t)
    for (int i = 0; i < m.cols(); ++i) x[std::size_t(t) * m.cols() + i] = m(t, i);
  return x;
}

// L = sum_t sum_i w[t, i] o[t, i] with o from the core rule in double; q, k, v, w: (T, d);
// u: (T, d) (VLA's penalty input) or empty (rules without one read 0); gate: (T) or empty (read 0).
template <class Rule>
double core_loss(const Rule& rule, int T, int d, const std::vector<double>& q, const std::vector<double>& k,
                 const std::vector<double>& v, const std::vector<double>& u, const std::vector<double>& gate,
                 const std::vector<double>& w) {
  double L = 0;
  {
    auto st = rule.init(1, d);
    vla::HeadInputs<double> in;
    in.q.resize(d, 1); in.k.resize(d, 1); in.v.resize(d, 1); in.u.resize(d, 1); in.gate.resize(1, 1);
    vla::Mat<double> out;
    for (int t = 0; t < T; ++t) {
      for (int i = 0; i < d; ++i) {
        const std::size_t x = std::size_t(t) * d + i;
        in.q(i, 0) = q[x]; in.k(i, 0) = k[x]; in.v(i, 0) = v[x]; in.u(i, 0) = u.empty() ? 0.0 : u[x];
      }
      in.gate(0, 0) = gate.empty() ? 0.0 : gate[t];
      rule.step(st, in, out, nullptr);
      for (int i = 0; i < d; ++i) L += w[std::size_t(t) * d + i] * out(i, 0);
    }
  }
  return L;
}

// The core head forward and backward of cfg's rule on the same inputs, dO = w: the outputs o and the
// gradients dq, dk, dv, du, dg as flat (T, d) / (T) vectors.
struct HeadRun {
  std::vector<double> o, dq, dk, dv, du, dg;
};
template <class Rule>
HeadRun core_head(const Rule& rule, int T, int d, const std::vector<double>& q, const std::vector<double>& k,
                  const std::vector<double>& v, const std::vector<double>& u, const std::vector<double>& gate,
                  const std::vector<double>& w) {
  {
    vla::HeadSequence<double> x;
    x.q = rows(T, d, q); x.k = rows(T, d, k); x.v = rows(T, d, v);
    if (Rule::needs.penalty) x.u = rows(T, d, u);
    if (Rule::needs.gate) x.g = Eigen::Map<const vla::Mat<double>>(gate.data(), T, 1);
    const auto r = vla::model::head_forward_backward(rule, x, rows(T, d, w));
    return HeadRun{flat(r.O), flat(r.grad.dq), flat(r.grad.dk), flat(r.grad.dv), flat(r.grad.du),
                   std::vector<double>(r.grad.dg.data(), r.grad.dg.data() + r.grad.dg.size())};
  }
}

// The rule of the mixer `name` with the command line's defaults.
template <class Rule> Rule rule_named(const std::string& name) {
  vla::MixerConfig cfg;
  cfg.mixer = name;
  return Rule::from_config(cfg);
}

// The head function's forward must be the core rule's (else its adjoints differentiate some other
// function): sum(w * o) agrees with the core loss L0 to double rounding over T d^2 operations.
void check_forward_matches_core(const std::vector<double>& w, const std::vector<double>& o, double L0) {
  double L_ref = 0;
  for (std::size_t x = 0; x < w.size(); ++x) L_ref += w[x] * o[x];
  CHECK(std::abs(L_ref - L0) <= 1e-10 * (1 + std::abs(L0)));
}

// One input of the loss and the head backward's gradient of L with respect to it.
struct Arg {
  const char* name;
  std::vector<double>* x;
  const std::vector<double>* g;
};

// Checks every element of every arg's gradient against central differences of loss() (which reads
// the args through their pointers). h = 1e-5: truncation ~ h^2 |L'''| ~ 1e-10 and cancellation
// ~ 2^-53 |L| / h ~ 1e-10 relative to O(1) gradients, so 1e-6 of the largest gradient leaves a 10^4
// margin over both while any wrong adjoint term (a missing factor, a dropped branch) is O(1) off.
template <class Loss> void check_central_differences(const std::string& what, const std::vector<Arg>& args, Loss&& loss) {
  const double h = 1e-5;
  for (const Arg& a : args) {
    REQUIRE(a.g->size() == a.x->size());
    double gmax = 0, emax = 0;
    for (std::size_t x = 0; x < a.x->size(); ++x) {
      const double x0 = (*a.x)[x];
      (*a.x)[x] = x0 + h;
      const double Lp = loss();
      (*a.x)[x] = x0 - h;
      const double Lm = loss();
      (*a.x)[x] = x0;
      const double fd = (Lp - Lm) / (2 * h);
      gmax = std::max(gmax, std::abs(fd));
      emax = std::max(emax, std::abs(fd - (*a.g)[x]));
    }
    INFO(what << " d L / d " << a.name << ": max |fd - head backward| = " << emax << ", max |fd| = " << gmax);
    CHECK(gmax > 0);  // the input reaches the loss (else the comparison below is vacuous)
    CHECK(emax <= 1e-6 * gmax);
  }
}

}  // namespace

TEST_CASE("VLA head backward matches central finite differences of the core forward", "[train]") {
  // T = 43 crosses two refresh steps (t + 1 = 20, 40); d = 5 is not a power of two (no layout luck).
  const int T = 43, d = 5;
  const std::size_t N = std::size_t(T) * d;
  std::mt19937_64 gen(2024);
  std::normal_distribution<double> n(0.0, 1.0);
  std::vector<double> q(N), k(N), v(N), u(N), w(N);
  for (auto* x : {&q, &k, &v, &u, &w})
    for (double& e : *x) e = n(gen);

  const auto rule = rule_named<vla::VlaRule<vla::Precision<double>>>("vla");
  const HeadRun r = core_head(rule, T, d, q, k, v, u, {}, w);
  auto loss = [&] { return core_loss(rule, T, d, q, k, v, u, {}, w); };
  check_forward_matches_core(w, r.o, loss());
  // Every input element is checked (4 * 215 = 860 perturbations of a 43-step forward: well under a second).
  check_central_differences("vla", {{"q_raw", &q, &r.dq}, {"k_raw", &k, &r.dk}, {"v", &v, &r.dv}, {"u_raw", &u, &r.du}}, loss);
}

TEST_CASE("linear attention and DeltaNet head backward match finite differences of the core rules", "[train]") {
  // Same scheme and tolerance as the VLA case above.
  const int T = 31, d = 5;
  const std::size_t N = std::size_t(T) * d;
  auto check = [&](const auto& rule, const std::string& name, std::uint64_t seed, bool gated) {
    std::mt19937_64 gen(seed);
    std::normal_distribution<double> n(0.0, 1.0);
    std::vector<double> q(N), k(N), v(N), w(N), gate(T);
    for (auto* x : {&q, &k, &v, &w, &gate})
      for (double& e : *x) e = n(gen);
    const HeadRun r = core_head(rule, T, d, q, k, v, {}, gate, w);
    auto loss = [&] { return core_loss(rule, T, d, q, k, v, {}, gate, w); };
    INFO(name);
    check_forward_matches_core(w, r.o, loss());
    std::vector<Arg> args{{"q_raw", &q, &r.dq}, {"k_raw", &k, &r.dk}, {"v", &v, &r.dv}};
    if (gated) args.push_back({"gate", &gate, &r.dg});
    check_central_differences(name, args, loss);
  };
  using P = vla::Precision<double>;
  check(rule_named<vla::LinearAttentionRule<P>>("linear"), "linear", 78, false);
  check(rule_named<vla::DeltaNetRule<P>>("deltanet"), "deltanet", 77, true);
  // The normalised linear attention of Remark 1 (the analyses' "linear-normalised", writing v k_hat^T):
  // its key gradient passes through unit()'s adjoint.
  vla::LinearAttentionOptions normalised;
  normalised.normalise_key = true;
  check(vla::LinearAttentionRule<P>(normalised), "linear (normalised key)", 79, false);
}
