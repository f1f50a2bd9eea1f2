#pragma once
// Analysis 1: the per-step state Jacobian along a trajectory of the Sec. 6.2 random-input protocol
// (analysis/head_stream.hpp), for any rule: ||M_t||_2 three ways, the product norm
// ||M_1 ... M_t||_2 (Table 2's "gradient magnification after T = 25"), and the largest Lyapunov
// exponent of the product over all T steps (analysis/spectral.hpp). Double precision: VLAv2's
// product reaches ~1e35, far inside double's range.
#include "core/rules/registry.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace vla::analysis {

struct JacobianConfig {
  std::vector<int> d_heads{32, 64, 96, 128};
  std::vector<std::string> mixers{"vla-v2", "vla"};
  int T = 200;            // steps per trajectory (closed form and Lyapunov over all of them)
  int check_steps = 25;   // steps on which power iteration and JacobiSVD are also computed
  int product_T = 25;     // Table 2's horizon
  std::uint64_t seed = 42;
  MixerConfig base;       // lambda0, eps, refresh for the VLA variants
  void validate() const;
};

struct JacobianSeries {
  std::string mixer;
  int d = 0;
  std::vector<double> closed;        // (T) ||M_t||_2, closed form
  std::vector<double> power;         // (check_steps) power iteration
  std::vector<double> svd;           // (check_steps) JacobiSVD
  std::vector<double> product;       // (product_T) ||M_1 ... M_t||_2 by JacobiSVD
  double lyapunov = 0;               // largest exponent per step (natural log), over T
  double max_rel_disagreement = 0;   // max over checked steps of |closed - svd| / svd and |power - svd| / svd
  double mean_norm() const;          // mean of closed over t
  double max_norm() const;
};

std::vector<JacobianSeries> run_jacobian(const JacobianConfig& cfg);

// run_jacobian in independent units, to split over processes (core/parallel/group.hpp): unit i is the
// series of mixer i / d_heads.size() at d_head i % d_heads.size(), run_jacobian's order.
// jacobian_units validates the config and returns how many there are.
std::size_t jacobian_units(const JacobianConfig& cfg);
JacobianSeries run_jacobian_unit(const JacobianConfig& cfg, std::size_t unit);
// Its relative cost for the deal: d_h^3 (the JacobiSVDs of (d_h, d_h) maps dominate).
double jacobian_unit_cost(const JacobianConfig& cfg, std::size_t unit);
// A series as bytes and back, bit for bit (core/parallel/bytes.hpp).
std::string encode_series(const JacobianSeries& s);
JacobianSeries decode_series(const std::string& bytes);
// Writes jacobian_steps.csv (t, one column per series), jacobian_product.csv (t, per series),
// jacobian_summary.csv and the two plots; returns a text summary.
std::string write_jacobian(const JacobianConfig& cfg, const std::vector<JacobianSeries>& r,
                           const std::filesystem::path& dir);

}  // namespace vla::analysis
