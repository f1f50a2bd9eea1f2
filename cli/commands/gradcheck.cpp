// `vla gradcheck [--mixer M]`: the whole-model gradient check (core/model/gradcheck.hpp) in double on
// the tiny model (d = 8, H = 2, T = 6, vocab 16). Prints the relative error per
// parameter tensor and its bound; exits 1 when any tensor is above its bound.
#include "cli/command.hpp"
#include "cli/list_option.hpp"
#include "core/model/gradcheck.hpp"
#include "core/rules/registry.hpp"

#include <fmt/format.h>

namespace {

struct Args {
  std::vector<std::string> mixers{vla::Rules::kNames.begin(), vla::Rules::kNames.end()};  // every mixer
  std::uint64_t seed = 5;
};

const vla::cli::RegisterCommand reg{
    "gradcheck", "Check the model's hand-written backward against central finite differences (double)",
    [](CLI::App& app) {
      auto a = std::make_shared<Args>();
      vla::cli::add_list_option(app, "--mixer", a->mixers, "mixers to check (default: all)", vla::kMixerNames);
      app.add_option("--seed", a->seed, "parameter and data seed")->capture_default_str();
      app.final_callback([a] {
        int failed = 0;
        for (const auto& m : a->mixers) {
          vla::MixerConfig mc;
          mc.mixer = m;
          vla::model::tiny_problem(mc, a->seed).cfg.validate();  // unknown mixer: exit 2 before any work
        }
        for (const auto& m : a->mixers) {
          vla::MixerConfig mc;
          mc.mixer = m;
          const auto checks = vla::model::gradcheck<double>(vla::model::tiny_problem(mc, a->seed + 6), a->seed);
          double worst = 0;
          fmt::print("mixer {}\n  {:<14} {:>6} {:>12} {:>12} {:>12}\n", m, "tensor", "size", "|grad|", "rel_err", "bound");
          for (const auto& c : checks) {
            fmt::print("  {:<14} {:>6} {:>12.3e} {:>12.3e} {:>12.3e} {}\n", c.name, c.size, c.grad_norm, c.rel_err, c.bound,
                       c.pass() ? "ok" : "FAIL");
            failed += !c.pass();
            worst = std::max(worst, c.rel_err);
          }
          fmt::print("  worst relative error {:.3e}\n", worst);
        }
        if (failed) throw std::runtime_error(fmt::format("gradcheck: {} tensor(s) above their bound", failed));
        fmt::print("gradcheck: all tensors within their bounds\n");
      });
    }};

}  // namespace
