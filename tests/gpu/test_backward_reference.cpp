// The CPU reference backward (gpu/vla_backward_reference.hpp) against central finite differences of
// the toolkit's own CPU forward (core/rules/vla.hpp through with_rule<Precision<double>>). No [gpu]
// tag: it needs no device, so CI (nvcc present, no GPU) runs it; it is what every GPU backward test
// trusts, so it must be checked against an independent forward, not against the reference's own.
#include "core/rules/registry.hpp"
#include "gpu/delta_backward_reference.hpp"
#include "gpu/vla_backward_reference.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace {

// L = sum_t sum_i w[t, i] o[t, i] with o from the core rule `mixer` in double; q, k, v, w: (T, d);
// u: (T, d) (VLA's penalty input) or empty (rules without one read 0); gate: (T) or empty (read 0).
double core_loss(const std::string& mixer, int T, int d, const std::vector<double>& q, const std::vector<double>& k,
                 const std::vector<double>& v, const std::vector<double>& u, const std::vector<double>& gate,
                 const std::vector<double>& w) {
  vla::MixerConfig cfg;
  cfg.mixer = mixer;
  double L = 0;
  vla::with_rule<vla::Precision<double>>(cfg, [&](auto rule) {
    auto st = rule.init(1, d);
    vla::HeadInputs<double> in;
    in.q.resize(d, 1); in.k.resize(d, 1); in.v.resize(d, 1); in.u.resize(d, 1); in.gate.resize(1);
    vla::Mat<double> out;
    for (int t = 0; t < T; ++t) {
      for (int i = 0; i < d; ++i) {
        const std::size_t x = std::size_t(t) * d + i;
        in.q(i, 0) = q[x]; in.k(i, 0) = k[x]; in.v(i, 0) = v[x]; in.u(i, 0) = u.empty() ? 0.0 : u[x];
      }
      in.gate(0) = gate.empty() ? 0.0 : gate[t];
      rule.step(st, in, out, nullptr);
      for (int i = 0; i < d; ++i) L += w[std::size_t(t) * d + i] * out(i, 0);
    }
    return 0;
  });
  return L;
}

// The reference's own forward must be the core rule's (else its adjoints differentiate some other
// function): sum(w * o) agrees with the core loss L0 to double rounding over T d^2 operations.
void check_forward_matches_core(const std::vector<double>& w, const std::vector<double>& o, double L0) {
  double L_ref = 0;
  for (std::size_t x = 0; x < w.size(); ++x) L_ref += w[x] * o[x];
  CHECK(std::abs(L_ref - L0) <= 1e-10 * (1 + std::abs(L0)));
}

// One input of the loss and the reference's gradient of L with respect to it.
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
    INFO(what << " d L / d " << a.name << ": max |fd - ref| = " << emax << ", max |fd| = " << gmax);
    CHECK(gmax > 0);  // the input reaches the loss (else the comparison below is vacuous)
    CHECK(emax <= 1e-6 * gmax);
  }
}

}  // namespace

TEST_CASE("VLA reference backward matches central finite differences of the core forward", "[gpu-reference]") {
  // T = 43 crosses two refresh steps (t + 1 = 20, 40); d = 5 is not a power of two (no layout luck).
  const int T = 43, d = 5;
  const std::size_t N = std::size_t(T) * d;
  std::mt19937_64 gen(2024);
  std::normal_distribution<double> n(0.0, 1.0);
  std::vector<double> q(N), k(N), v(N), u(N), w(N);
  for (auto* x : {&q, &k, &v, &u, &w})
    for (double& e : *x) e = n(gen);

  std::vector<double> o, dq, dk, dv, du;
  vla::gpu::ref::vla_backward<double>(T, d, q, k, v, u, w, o, dq, dk, dv, du);
  auto loss = [&] { return core_loss("vla", T, d, q, k, v, u, {}, w); };
  check_forward_matches_core(w, o, loss());
  // Every input element is checked (4 * 215 = 860 perturbations of a 43-step forward: well under a second).
  check_central_differences("vla", {{"q_raw", &q, &dq}, {"k_raw", &k, &dk}, {"v", &v, &dv}, {"u_raw", &u, &du}}, loss);
}

TEST_CASE("linear attention and DeltaNet reference backward match finite differences of the core rules", "[gpu-reference]") {
  // Same scheme and tolerance as the VLA case above.
  const int T = 31, d = 5;
  const std::size_t N = std::size_t(T) * d;
  for (bool deltanet : {false, true}) {
    const std::string mixer = deltanet ? "deltanet" : "linear";
    std::mt19937_64 gen(deltanet ? 77 : 78);
    std::normal_distribution<double> n(0.0, 1.0);
    std::vector<double> q(N), k(N), v(N), w(N), gate(T);
    for (auto* x : {&q, &k, &v, &w, &gate})
      for (double& e : *x) e = n(gen);
    std::vector<double> o, dq, dk, dv, dgate;
    vla::gpu::ref::delta_backward<double>(deltanet, T, d, q, k, v, gate, w, o, dq, dk, dv, dgate);
    auto loss = [&] { return core_loss(mixer, T, d, q, k, v, {}, gate, w); };
    INFO(mixer);
    check_forward_matches_core(w, o, loss());
    std::vector<Arg> args{{"q_raw", &q, &dq}, {"k_raw", &k, &dk}, {"v", &v, &dv}};
    if (deltanet) args.push_back({"gate", &gate, &dgate});
    check_central_differences(mixer, args, loss);
  }
}
