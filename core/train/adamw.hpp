#pragma once
// AdamW (Loshchilov & Hutter) with the paper's settings (Sec. 5, Table 3): beta = (0.9, 0.999),
// eps = 1e-8, decoupled weight decay 1e-2 on the weight matrices (not on LayerNorm gains, biases:
// the usual choice, the paper does not say), and the learning-rate schedule: 10% linear warm-up to
// lr_max = 3e-4, then cosine decay to 0.
#include "core/model/params.hpp"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

namespace vla::train {

struct AdamWConfig {
  double lr = 3e-4, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 1e-2, warmup_frac = 0.1, clip = 1.0;
  // Throws std::invalid_argument naming the parameter (--lr; the others by their key in the config JSON,
  // they have no flag) when a value would make an update non-finite or meaningless.
  void validate() const {
    auto require = [](bool ok, const char* name, const char* allowed, double v) {
      if (!ok) throw std::invalid_argument(fmt::format("{}: must be {}, got {}", name, allowed, v));
    };
    require(std::isfinite(lr) && lr > 0, "--lr", "a finite number > 0", lr);
    require(beta1 >= 0 && beta1 < 1, "beta1", "in [0, 1)", beta1);
    require(beta2 >= 0 && beta2 < 1, "beta2", "in [0, 1)", beta2);
    require(std::isfinite(eps) && eps > 0, "adam_eps", "a finite number > 0", eps);
    require(std::isfinite(weight_decay) && weight_decay >= 0, "weight_decay", "a finite number >= 0", weight_decay);
    require(warmup_frac >= 0 && warmup_frac <= 1, "warmup_frac", "in [0, 1]", warmup_frac);
    require(std::isfinite(clip) && clip > 0, "clip", "a finite number > 0", clip);
  }
};

// lr at step s (0-based) of N: (s + 1) / W * lr for s < W = ceil(0.1 N), then lr/2 (1 + cos(pi (s - W) / (N - W))).
inline double learning_rate(const AdamWConfig& c, int s, int N) {
  const int W = std::max(1, int(std::ceil(c.warmup_frac * N)));
  if (s < W) return c.lr * double(s + 1) / W;
  if (N <= W) return c.lr;
  return 0.5 * c.lr * (1.0 + std::cos(M_PI * double(s - W) / double(N - W)));
}

template <class T> struct AdamWState {
  model::Params<T> m, v;  // first and second moments, same layout as the parameters
  long step = 0;          // updates applied so far
};

// One update; g is already clipped. Decay applies to tensors with more than one column (matrices).
template <class T>
void adamw_update(const AdamWConfig& c, double lr, model::Params<T>& p, const model::Params<T>& g, AdamWState<T>& st) {
  st.step += 1;
  const double bc1 = 1.0 - std::pow(c.beta1, double(st.step)), bc2 = 1.0 - std::pow(c.beta2, double(st.step));
  for (std::size_t i = 0; i < p.t.size(); ++i) {
    if (p.t[i].size() == 0) continue;
    const bool decay = p.t[i].cols() > 1;
    auto P = p.t[i].array();
    auto G = g.t[i].array();
    auto M = st.m.t[i].array();
    auto V = st.v.t[i].array();
    M = T(c.beta1) * M + T(1 - c.beta1) * G;
    V = T(c.beta2) * V + T(1 - c.beta2) * G * G;
    if (decay) P -= T(lr * c.weight_decay) * P;
    P -= T(lr) * (M / T(bc1)) / ((V / T(bc2)).sqrt() + T(c.eps));
  }
}

}  // namespace vla::train
