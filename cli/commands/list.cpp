// `vla list mixers` and `vla list precisions`: what a command takes for --mixer(s) and --precision(s),
// read from the one list of each (core/rules/registry.hpp, core/precisions.def), with what the
// toolkit does with each mixer: the projections its rule reads, whether it has a fixed-size state, a
// chunkwise-parallel form (analysis/chunked_exactness.hpp) and a CUDA path (the rule's GPU trait).
// The recurrences themselves are in README.md's table and docs/recurrences.md.
#include "analysis/chunked_exactness.hpp"
#include "cli/command.hpp"
#include "core/rules/gpu_support.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>

namespace {

std::string gates(const vla::Needs& n) {
  if (!n.gate) return "-";
  return n.gates == vla::Needs::kPerChannel ? "d_head" : std::to_string(n.gates);
}

std::string gpu(const vla::MixerConfig& cfg) {
  const auto k = vla::gpu_kernel_of(cfg);
  if (vla::gpu_serves(k.path, vla::GpuUse::LayerForward)) return "forward, training";
  if (vla::gpu_serves(k.path, vla::GpuUse::Training)) return "training";
  return "-";
}

void list_mixers() {
  fmt::print("{:<16} {:<10} {:<8} {:<6} {:<10} {}\n", "mixer", "state", "penalty", "gates", "chunkwise", "GPU");
  for (const auto name : vla::Rules::kNames) {
    vla::MixerConfig cfg;
    cfg.mixer = std::string(name);
    const vla::Needs n = vla::rule_needs(cfg);
    const bool recurrent =
        vla::with_rule<vla::Precision<double>>(cfg, [](const auto& r) { return std::decay_t<decltype(r)>::recurrent; });
    const auto& ch = vla::analysis::kChunkedRules;
    fmt::print("{:<16} {:<10} {:<8} {:<6} {:<10} {}\n", name, recurrent ? "fixed" : "KV cache", n.penalty ? "W_u k" : "-",
               gates(n), std::find(ch.begin(), ch.end(), cfg.mixer) != ch.end() ? "yes" : "-", gpu(cfg));
  }
  fmt::print("\n{} mixers; every one takes every precision (vla list precisions), the layer (vla layer-forward), CPU training\n"
             "(vla train) and --next-latent; README.md has each recurrence and its source.\n",
             vla::Rules::kCount);
}

const vla::cli::RegisterCommand reg{
    "list", "what --mixer and --precision take: `vla list mixers` (with each rule's projections, state, chunkwise form, GPU "
            "path), `vla list precisions`",
    [](CLI::App& app) {
      app.require_subcommand(1);
      app.add_subcommand("mixers", "every mixer of the registry, with what the toolkit does with it")->final_callback(list_mixers);
      app.add_subcommand("precisions", "every precision name (storage[+compute])")->final_callback([] {
        fmt::print("{}\n", vla::kPrecisionNames);
      });
    }};

}  // namespace
