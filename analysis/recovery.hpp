#pragma once
// Analysis 3: exact recovery and capacity without training (Proposition 3). Write n key-value pairs
// (one token each) and read them back: max_i ||S_n k_hat_i - v_i|| / ||v_i||, where k_hat_i is the
// key the rule itself used at step i (its WriteRecord.k_read), so every rule is read the way it wrote.
//
// Feeding chosen unit keys: every rule maps its raw key through phi = ELU + 1 and normalises, so the
// keys it can see are unit vectors of the open positive orthant. We choose unit keys kappa_i there and
// feed k_raw = phi^{-1}(kappa_i) entrywise (phi^{-1}(y) = y - 1 for y > 1, log y for 0 < y <= 1), and
// phi^{-1}(0) := -200: phi(-200) = e^-200 ~ 1e-87, far below mp50's relative resolution (1e-50), so an
// entry meant to be zero is zero to every precision we run. Key families (all (d, n), unit columns):
//   orthonormal  kappa_i = e_i (n <= d)
//   random       kappa_i = unit(phi(z_i)), z_i ~ N(0, I) (the keys Gaussian raw keys give; correlated)
//   correlated   Gram matrix (1 - rho) I + rho 1 1^T exactly: kappa_i = a e_i + b m, m = 1/sqrt(d),
//                a = sqrt(1 - rho), b = -a/sqrt(d) + sqrt(a^2/d + rho) (n <= d, 0 <= rho < 1)
// Values v_i ~ N(0, I). q = 0. VLA's penalty directions u = W_u k_raw with W_u ~ N(0, 1/d); DeltaNet
// ungated (beta = 1: the pure delta rule; a gate would only add forgetting).
#include "analysis/head_stream.hpp"
#include "core/precision.hpp"
#include "core/rules/registry.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace vla::analysis {

// Recovery is measured in double (the hardware floor) and in the ground truth mp50 (exact recovery up
// to 2^-167): the two precisions of the table it runs.
using RecoveryPrecisions = Precisions::sub<Precision<double>, Precision<mp50>>;

enum class KeyKind { Orthonormal, Random, Correlated };
KeyKind parse_key_kind(const std::string& name);  // orthonormal | random | correlated
std::string key_kind_name(KeyKind k);

Mat<double> make_keys(KeyKind kind, int d, int n, double rho, std::uint64_t seed);  // (d, n)
Mat<double> phi_inverse(const Mat<double>& keys);                                    // (d, n) raw keys
HeadStream recovery_stream(const Mat<double>& keys, const Mat<double>& values, std::uint64_t seed);

struct RecoveryConfig {
  int d_head = 32;
  std::vector<int> ns{8, 16, 24, 32};
  std::vector<std::string> key_kinds{"orthonormal", "random", "correlated"};
  double rho = 0.5;
  std::vector<std::string> mixers{"vla",     "vla-v2",        "vla-rls", "vla-fixed-a", "vla-no-knorm",
                                  "vla-key", "rls-classical", "deltanet", "linear"};
  std::vector<std::string> precisions = RecoveryPrecisions::name_list();
  std::uint64_t seed = 42;
  double rls_lambda0 = 1e-10;  // rls-classical only: lambda0 -> 0 is the unregularised least squares
  MixerConfig base;            // lambda0 (paper 0.1), eps, refresh for the VLA variants
  void validate() const;
};

struct RecoveryPoint {
  std::string mixer, keys, precision;
  int n = 0, d = 0;
  double max_rel_error = 0;
};

// One measurement: the rule named `mixer` in `precision` (one of RecoveryPrecisions; otherwise throws
// naming --precisions).
double recovery_error(const std::string& precision, const std::string& mixer, const MixerConfig& cfg,
                      const HeadStream& stream);
// The same quantity for the exact least-squares memory S = V K^+ (JacobiSVD), the reference, in the
// storage type of P (one of RecoveryPrecisions)...
template <class P> double least_squares_recovery_error_in(const Mat<double>& keys, const Mat<double>& values);
// ... and in the scalar T (double or mp50).
template <class T> double least_squares_recovery_error(const Mat<double>& keys, const Mat<double>& values) {
  return least_squares_recovery_error_in<Precision<T>>(keys, values);
}
// The measurement in P (one of RecoveryPrecisions), defined in recovery_impl.hpp and instantiated once
// per precision by generated translation units (core/precision_instances.cmake).
template <class P>
double recovery_error_in(const std::string& mixer, const MixerConfig& cfg, const HeadStream& stream);

std::vector<RecoveryPoint> run_recovery(const RecoveryConfig& cfg);
// recovery_<keys>_<precision>.csv (n, n/d, one column per mixer) and a plot per key family in double.
std::string write_recovery(const RecoveryConfig& cfg, const std::vector<RecoveryPoint>& r,
                           const std::filesystem::path& dir);

}  // namespace vla::analysis
