#include "analysis/recovery.hpp"

#include "analysis/plot.hpp"
#include "core/io/csv.hpp"
#include "core/layers/mixer_layer.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <string_view>

namespace vla::analysis {

KeyKind parse_key_kind(const std::string& name) {
  if (name == "orthonormal") return KeyKind::Orthonormal;
  if (name == "random") return KeyKind::Random;
  if (name == "correlated") return KeyKind::Correlated;
  throw std::invalid_argument(fmt::format("--keys: unknown key family '{}' (allowed: orthonormal, random, correlated)", name));
}

std::string key_kind_name(KeyKind k) {
  switch (k) {
    case KeyKind::Orthonormal: return "orthonormal";
    case KeyKind::Random: return "random";
    case KeyKind::Correlated: return "correlated";
  }
  return "?";
}

Mat<double> make_keys(KeyKind kind, int d, int n, double rho, std::uint64_t seed) {
  if (d < 1 || n < 1) throw std::invalid_argument(fmt::format("keys: d and n must be >= 1 (got {}, {})", d, n));
  if (kind != KeyKind::Random && n > d)
    throw std::invalid_argument(fmt::format("--n: {} keys need n <= d_h = {} (got n = {})", key_kind_name(kind), d, n));
  Mat<double> K = Mat<double>::Zero(d, n);  // (d, n)
  if (kind == KeyKind::Orthonormal) {
    for (int i = 0; i < n; ++i) K(i, i) = 1.0;
  } else if (kind == KeyKind::Random) {
    std::mt19937_64 gen(seed);
    std::normal_distribution<double> g(0.0, 1.0);
    for (int i = 0; i < n; ++i) {
      Vec<double> z(d);
      for (int j = 0; j < d; ++j) z(j) = g(gen);
      K.col(i) = unit(elu_plus_one(z));
    }
  } else {
    if (!(rho >= 0.0 && rho < 1.0)) throw std::invalid_argument(fmt::format("--rho: must be in [0, 1), got {}", rho));
    const double a = std::sqrt(1.0 - rho), sd = std::sqrt(double(d));
    const double b = -a / sd + std::sqrt(a * a / d + rho);  // K^T K = a^2 I + (2ab/sqrt(d) + b^2) 1 1^T
    for (int i = 0; i < n; ++i) {
      K.col(i).setConstant(b / sd);
      K(i, i) += a;
    }
  }
  return K;
}

Mat<double> phi_inverse(const Mat<double>& keys) {
  return keys.unaryExpr([](double y) {
    if (y < 0) throw std::invalid_argument("keys: phi = ELU + 1 only produces positive entries");
    if (y == 0) return -200.0;
    return y > 1 ? y - 1 : std::log(y);
  });
}

HeadStream recovery_stream(const Mat<double>& keys, const Mat<double>& values, std::uint64_t seed) {
  const int d = int(keys.rows()), n = int(keys.cols());
  HeadStream s{d, n, 1, Mat<double>::Zero(d, n), phi_inverse(keys), values, {}, Mat<double>::Zero(1, n)};  // gate (1, n): unread
  const auto w = random_weights<double>(LayerShape{d, d, 1, 1}, Needs{.penalty = true, .gate = false}, seed);
  s.u = w.Wu * s.k;  // (d, n): Alg. 1 line 10 before normalisation
  s.validate();
  return s;
}

double recovery_error(const std::string& precision, const std::string& mixer, const MixerConfig& cfg,
                      const HeadStream& stream) {
  return with_precision_in<RecoveryPrecisions>(precision, "--precisions", [&](auto p) {
    return recovery_error_in<decltype(p)>(mixer, cfg, stream);
  });
}

void RecoveryConfig::validate() const {
  if (d_head < 1) throw std::invalid_argument(fmt::format("--d-head: must be >= 1, got {}", d_head));
  if (ns.empty()) throw std::invalid_argument("--n: at least one n is needed");
  for (int n : ns)
    if (n < 1) throw std::invalid_argument(fmt::format("--n: must be >= 1, got {}", n));
  for (const auto& k : key_kinds) parse_key_kind(k);
  for (const auto& p : precisions) with_precision_in<RecoveryPrecisions>(p, "--precisions", [](auto) {});
  if (!(rls_lambda0 > 0)) throw std::invalid_argument("--rls-lambda0: must be > 0");
  // The protocol writes keys through phi^-1, so that the rule's feature phi(k) is the family's key, and
  // reads S phi(k): the rules with the eq. (11) feature map. The others (raw keys, RMSNorm features,
  // slot memories) would be handed other keys than the family's: not measured here.
  static constexpr std::array<std::string_view, 9> kRecoverable{"vla",     "vla-v2",   "vla-rls",           "vla-fixed-a", "vla-no-knorm",
                                                                "vla-key", "rls-classical", "linear-normalised", "deltanet"};
  for (const auto& m : mixers)
    if (m != "linear" && std::find(kRecoverable.begin(), kRecoverable.end(), m) == kRecoverable.end())
      throw std::invalid_argument(fmt::format("--mixers: recovery measures the rules with the eq. (11) feature map, not '{}' "
                                              "(allowed: linear, {})", m, fmt::join(kRecoverable, ", ")));
  base.penalty.validate();
}

std::vector<RecoveryPoint> run_recovery(const RecoveryConfig& cfg) {
  cfg.validate();
  std::vector<RecoveryPoint> out;
  MixerConfig base = cfg.base;
  base.deltanet_gated = false;
  for (const auto& kname : cfg.key_kinds) {
    const KeyKind kind = parse_key_kind(kname);
    for (int n : cfg.ns) {
      if (kind != KeyKind::Random && n > cfg.d_head) continue;  // such families stop at n = d_h
      const Mat<double> K = make_keys(kind, cfg.d_head, n, cfg.rho, cfg.seed);
      std::mt19937_64 gen(cfg.seed + 2);
      std::normal_distribution<double> g(0.0, 1.0);
      Mat<double> V(cfg.d_head, n);  // (d, n) values
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < cfg.d_head; ++j) V(j, i) = g(gen);
      const HeadStream stream = recovery_stream(K, V, cfg.seed);
      for (const auto& p : cfg.precisions) {
        for (const auto& m : cfg.mixers) {
          MixerConfig mc = base;
          if (m == "rls-classical") mc.penalty.lambda0 = cfg.rls_lambda0;
          out.push_back({m, kname, p, n, cfg.d_head, recovery_error(p, m, mc, stream)});
        }
        out.push_back({"least-squares", kname, p, n, cfg.d_head,
                       with_precision_in<RecoveryPrecisions>(p, "--precisions", [&](auto q) {
                         return least_squares_recovery_error_in<decltype(q)>(K, V);
                       })});
      }
    }
  }
  return out;
}

std::string write_recovery(const RecoveryConfig& cfg, const std::vector<RecoveryPoint>& r,
                           const std::filesystem::path& dir) {
  std::vector<std::string> mixers = cfg.mixers;
  mixers.push_back("least-squares");
  std::string text = fmt::format(
      "Exact recovery (Prop. 3): max_i ||S_n k_hat_i - v_i|| / ||v_i||, d_h = {}, rho = {}, lambda0 = {} "
      "(rls-classical {}), seed {}\n", cfg.d_head, cfg.rho, cfg.base.penalty.lambda0, cfg.rls_lambda0, cfg.seed);
  for (const auto& kname : cfg.key_kinds)
    for (const auto& p : cfg.precisions) {
      std::vector<std::string> header{"n", "n_over_d"};
      for (const auto& m : mixers) header.push_back(m);
      io::CsvTable table(header);
      text += fmt::format("  keys {:<12} {:<7} {:>4}", kname, p, "n");
      for (const auto& m : mixers) text += fmt::format(" {:>13}", m);
      text += "\n";
      for (int n : cfg.ns) {
        std::vector<double> row{double(n), double(n) / cfg.d_head};
        for (const auto& m : mixers)
          for (const auto& pt : r)
            if (pt.keys == kname && pt.precision == p && pt.n == n && pt.mixer == m) row.push_back(pt.max_rel_error);
        if (row.size() != header.size()) continue;
        table.add_row(row);
        text += fmt::format("  {:<17} {:<7} {:>4}", "", "", n);
        for (std::size_t i = 2; i < row.size(); ++i) text += fmt::format(" {:>13.3e}", row[i]);
        text += "\n";
      }
      const auto stem = fmt::format("recovery_{}_{}", kname, p);
      table.write(dir / (stem + ".csv"));
      if (p == Precision<double>::name() && table.rows().size() > 1) {
        PlotSpec ps = plot_spec(fmt::format("Recovery error after n writes, {} keys, d_h = {} ({})", kname, cfg.d_head, p),
                                "n / d_h", "max_i ||S_n k_i - v_i|| / ||v_i|| (log scale)", true);
        ps.with = "linespoints";
        ps.extra = "set yrange [1e-17:*]\n";
        for (std::size_t i = 0; i < mixers.size(); ++i) ps.series.push_back({int(i) + 3, mixers[i], 2});
        text += plot_csv(dir / (stem + ".csv"), dir / (stem + ".png"), ps);
      }
    }
  return text;
}

}  // namespace vla::analysis
