// `vla stability`: the Fig. 4 study (||S_t||_F and ||A_t||_F over T random inputs).
#include "cli/command.hpp"
#include "cli/list_option.hpp"
#include "cli/mixer_options.hpp"
#include "studies/fig4/stability.hpp"

#include <fmt/format.h>

namespace {

struct Args {
  vla::studies::StabilityConfig cfg;
  std::string out = "reports/fig4";
};

const vla::cli::RegisterCommand reg{
    "stability", "Fig. 4: ||S_t||_F (linear, DeltaNet, VLA) and ||A_t||_F (VLA) over T random inputs",
    [](CLI::App& app) {
      auto a = std::make_shared<Args>();
      auto& c = a->cfg;
      app.add_option("--T", c.T, "sequence length")->capture_default_str();
      app.add_option("--d-head", c.d_head, "head dimension (single head, d_model = d_head)")->capture_default_str();
      vla::cli::add_list_option(app, "--seeds", c.seeds, "seeds (weights from seed, inputs from seed+1)");
      app.add_option("--precision", c.precision, std::string("storage[+compute]: ") + std::string(vla::kPrecisionNames))
          ->capture_default_str();
      vla::cli::add_list_option(app, "--mixers", c.mixers, "mixers to track", vla::kMixerNames);
      vla::cli::add_mixer_options(app, c.base, {"next_latent"});  // the rules' own steps, not the layer
      app.add_option("--out", a->out, "output folder (state_norms.csv, summary.txt)")->capture_default_str();
      app.final_callback([a] {
        const auto r = vla::studies::run_stability(a->cfg);
        fmt::print("{}", vla::studies::write_stability(r, a->out));
        fmt::print("  wrote {}/state_norms.csv and {}/summary.txt\n", a->out, a->out);
      });
    }};

}  // namespace
