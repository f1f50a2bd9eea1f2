#include "analysis/unit_jacobian_search.hpp"

#include "analysis/spectral.hpp"

#include <fmt/format.h>

namespace vla::analysis {

std::string UnitJacobianCounterexample::describe() const {
  if (!found) return "none found";
  return fmt::format("d_h = {}, k_hat = ({:.6g}), alpha_hat = ({:.6g}): ||I - alpha_hat k_hat^T||_2 = {:.15g} "
                     "(closed form), {:.15g} (JacobiSVD), {:.15g} (power iteration), mp50",
                     d, fmt::join(k_hat, ", "), fmt::join(alpha_hat, ", "), norm_closed, norm_svd, norm_power);
}

double unit_pair_norm(double p) { return std::sqrt(1.0 + (1.0 - 2.0 * p + std::sqrt(5.0 - 4.0 * p)) / 2.0); }

namespace {

std::vector<Vec<mp50>> candidates(int d) {
  std::vector<Vec<mp50>> c;
  const mp50 r = mp50(1) / boost::multiprecision::sqrt(mp50(2));
  for (int i = 0; i < d; ++i)
    for (int s : {1, -1}) {
      Vec<mp50> e = Vec<mp50>::Zero(d);
      e(i) = mp50(s);
      c.push_back(e);
      for (int j = i + 1; j < d; ++j)
        for (int s2 : {1, -1}) {
          Vec<mp50> f = Vec<mp50>::Zero(d);
          f(i) = mp50(s) * r;
          f(j) = mp50(s2) * r;
          c.push_back(f);
        }
    }
  return c;
}

std::vector<double> to_std(const Vec<mp50>& v) {
  std::vector<double> o;
  for (Eigen::Index i = 0; i < v.size(); ++i) o.push_back(to_double(v(i)));
  return o;
}

}  // namespace

UnitJacobianCounterexample search_unit_jacobian(int max_d, bool positive_overlap_only, double tol) {
  if (max_d < 1) throw std::invalid_argument(fmt::format("max_d: must be >= 1, got {}", max_d));
  for (int d = 1; d <= max_d; ++d) {
    const auto cand = candidates(d);
    mp50 best(0);
    const Vec<mp50>*bk = nullptr, *ba = nullptr;
    for (const auto& k : cand)
      for (const auto& a : cand) {
        if (positive_overlap_only && !(k.dot(a) > mp50(0))) continue;
        // M = I - k_hat alpha_hat^T as the rules apply it (transpose of eq. 14; same singular values).
        const mp50 n = rank1_perturbation_norm(mp50(1), k, a);
        if (n > best) { best = n; bk = &k; ba = &a; }
      }
    if (bk && best > mp50(1) + mp50(tol)) {
      const Mat<mp50> M = step_map(*bk, *ba, mp50(1));
      UnitJacobianCounterexample c;
      c.found = true;
      c.d = d;
      c.k_hat = to_std(*bk);
      c.alpha_hat = to_std(*ba);
      c.norm_closed = to_double(best);
      c.norm_svd = to_double(svd_norm(M));
      c.norm_power = to_double(power_iteration_norm(M, 1e-40, 20000));
      return c;
    }
  }
  return {};
}

}  // namespace vla::analysis
