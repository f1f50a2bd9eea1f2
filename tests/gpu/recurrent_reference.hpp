#pragma once
// What the forward kernels' GPU tests share: random (B, H, T, d) inputs, the CPU rule run over them in
// double as the reference, and the error measure with its fp32 bound.
#include "core/rules/registry.hpp"

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace vla::gpu_test {

struct Shape { int B, H, T, d; };

// Host inputs in the kernel's (B, H, T, d) layout; gate (B, H, T).
struct Inputs {
  Shape s;
  std::vector<float> q, k, v, u, g;
};

inline Inputs random_inputs(Shape s, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  const std::size_t N = std::size_t(s.B) * s.H * s.T * s.d;
  Inputs in{s, std::vector<float>(N), std::vector<float>(N), std::vector<float>(N), std::vector<float>(N),
            std::vector<float>(std::size_t(s.B) * s.H * s.T)};
  for (auto* x : {&in.q, &in.k, &in.v, &in.u, &in.g})
    for (float& e : *x) e = n(gen);
  return in;
}

struct Outputs { std::vector<float> o, stats; };

// The CPU rule in scalar Sc (double: the reference) on the same (fp32-valued) inputs; stats as the
// kernel lays them out.
template <class Sc = double> Outputs run_cpu(const vla::MixerConfig& cfg, const Inputs& in) {
  const Shape s = in.s;
  Outputs r{std::vector<float>(in.q.size()), std::vector<float>(std::size_t(s.B) * s.H * s.T * 3)};
  vla::with_rule<vla::Precision<Sc>>(cfg, [&](auto rule) {
    for (int h = 0; h < s.H; ++h) {
      auto st = rule.init(s.B, s.d);
      vla::HeadInputs<Sc> hin;
      vla::Mat<Sc> out;
      vla::StepRecord<Sc> rec;
      for (int t = 0; t < s.T; ++t) {
        hin.q.resize(s.d, s.B); hin.k.resize(s.d, s.B); hin.v.resize(s.d, s.B); hin.u.resize(s.d, s.B);
        hin.gate.resize(1, s.B);
        for (int b = 0; b < s.B; ++b) {
          const std::size_t base = ((std::size_t(b) * s.H + h) * s.T + t) * s.d;
          for (int i = 0; i < s.d; ++i) {
            hin.q(i, b) = in.q[base + i]; hin.k(i, b) = in.k[base + i];
            hin.v(i, b) = in.v[base + i]; hin.u(i, b) = in.u[base + i];
          }
          hin.gate(0, b) = in.g[(std::size_t(b) * s.H + h) * s.T + t];
        }
        rule.step(st, hin, out, &rec);
        for (int b = 0; b < s.B; ++b) {
          const std::size_t row = (std::size_t(b) * s.H + h) * s.T + t;
          for (int i = 0; i < s.d; ++i) r.o[row * s.d + i] = float(out(i, b));
          r.stats[row * 3] = float(rec.stats[b].S_fro);
          r.stats[row * 3 + 1] = float(rec.stats[b].A_fro);
          r.stats[row * 3 + 2] = float(rec.stats[b].delta);
        }
      }
    }
    return 0;
  });
  return r;
}

// ||a - b|| / ||b|| over every `stride`-th element from `offset`; NaN anywhere gives NaN (never passes).
inline double rel_err(const std::vector<float>& a, const std::vector<float>& b, std::size_t offset = 0, std::size_t stride = 1) {
  double num = 0, den = 0;
  for (std::size_t i = offset; i < a.size(); i += stride) {
    const double d = double(a[i]) - double(b[i]);
    num += d * d;
    den += double(b[i]) * double(b[i]);
  }
  return std::sqrt(num) / std::sqrt(den);
}

// Tolerance from fp32: each step is a few d-term dot products (forward error <= d u, Higham's gamma_d,
// u = 2^-24 the fp32 unit roundoff) and the state carries every step's rounding into all later steps,
// so the worst case grows linearly: T d u relative to the output's size. The double reference adds
// nothing at this scale (its own error is ~T d 2^-53).
inline double fp32_bound(const Shape& s) { return double(s.T) * s.d * std::ldexp(1.0, -24); }

template <class Sc = double> Outputs run_cpu(const std::string& mixer, const Inputs& in) {
  vla::MixerConfig cfg;
  cfg.mixer = mixer;
  return run_cpu<Sc>(cfg, in);
}

}  // namespace vla::gpu_test
