// `vla jacobian`, `vla recovery`, `vla precision-atlas`: the ledger's analyses on their own, with
// every setting on the command line (analysis/jacobian.hpp, recovery.hpp, precision_atlas.hpp). Their
// head streams write one penalty direction per step, so none takes --rank; the atlas sets the delta
// policy per cell (--policies), so it takes no --delta-policy. Under an MPI launcher, jacobian and
// precision-atlas split their series / (mixer, policy) units over the ranks (core/parallel/group.hpp) and
// the root writes the same files as one process. Their rules (analysis/rule_zoo.hpp) do not include MVA,
// so none takes --mva-levels.
#include "analysis/jacobian.hpp"
#include "analysis/precision_atlas.hpp"
#include "analysis/recovery.hpp"
#include "cli/command.hpp"
#include "cli/list_option.hpp"
#include "cli/mixer_options.hpp"
#include "core/parallel/group.hpp"

#include <fmt/format.h>

namespace {

const vla::cli::RegisterCommand jac{
    "jacobian", "per-step Jacobian spectral norm three ways, product norm over T, Lyapunov exponent (Table 2)",
    [](CLI::App& app) {
      auto c = std::make_shared<vla::analysis::JacobianConfig>();
      auto out = std::make_shared<std::string>("reports/jacobian");
      vla::cli::add_list_option(app, "--d-heads", c->d_heads, "head dimensions");
      vla::cli::add_list_option(app, "--mixers", c->mixers, "rules");
      app.add_option("--T", c->T, "steps")->capture_default_str();
      app.add_option("--check-steps", c->check_steps, "steps with power iteration and JacobiSVD too")->capture_default_str();
      app.add_option("--product-T", c->product_T, "horizon of the product norm")->capture_default_str();
      app.add_option("--seed", c->seed, "seed (weights; inputs from seed + 1)")->capture_default_str();
      vla::cli::add_mixer_options(app, c->base, {"rank", "mva_levels", "next_latent"});
      app.add_option("--out", *out, "output folder")->capture_default_str();
      app.final_callback([c, out] {
        auto& ranks = vla::parallel::world();
        const auto series = vla::parallel::gather_results(
            ranks, vla::analysis::jacobian_units(*c), [&](std::size_t i) { return vla::analysis::run_jacobian_unit(*c, i); },
            vla::analysis::encode_series, vla::analysis::decode_series,
            [&](std::size_t i) { return vla::analysis::jacobian_unit_cost(*c, i); });
        if (ranks.root()) fmt::print("{}", vla::analysis::write_jacobian(*c, series, *out));
      });
    },
    true};

const vla::cli::RegisterCommand rec{
    "recovery", "exact recovery / capacity (Prop. 3): write n pairs, read them back, per rule, key family, precision",
    [](CLI::App& app) {
      auto c = std::make_shared<vla::analysis::RecoveryConfig>();
      auto out = std::make_shared<std::string>("reports/recovery");
      app.add_option("--d-head", c->d_head, "head dimension")->capture_default_str();
      vla::cli::add_list_option(app, "--n", c->ns, "numbers of pairs");
      vla::cli::add_list_option(app, "--keys", c->key_kinds, "orthonormal, random, correlated");
      app.add_option("--rho", c->rho, "pairwise correlation of the correlated family")->capture_default_str();
      vla::cli::add_list_option(app, "--mixers", c->mixers, "rules");
      vla::cli::add_list_option(app, "--precisions", c->precisions, std::string(vla::analysis::RecoveryPrecisions::names()));
      app.add_option("--rls-lambda0", c->rls_lambda0, "lambda0 of rls-classical")->capture_default_str();
      app.add_option("--seed", c->seed, "seed")->capture_default_str();
      vla::cli::add_mixer_options(app, c->base, {"rank", "mva_levels", "next_latent"});
      app.add_option("--out", *out, "output folder")->capture_default_str();
      app.final_callback([c, out] { fmt::print("{}", vla::analysis::write_recovery(*c, vla::analysis::run_recovery(*c), *out)); });
    }};

const vla::cli::RegisterCommand atlas{
    "precision-atlas", "each rule in each format vs mp50: error vs t, first non-finite step, A loses PD, guard firings",
    [](CLI::App& app) {
      auto c = std::make_shared<vla::analysis::AtlasConfig>();
      auto out = std::make_shared<std::string>("reports/precision_atlas");
      app.add_option("--d-head", c->d_head, "head dimension")->capture_default_str();
      app.add_option("--T", c->T, "steps")->capture_default_str();
      app.add_option("--seed", c->seed, "seed")->capture_default_str();
      vla::cli::add_list_option(app, "--mixers", c->mixers, "rules");
      vla::cli::add_list_option(app, "--precisions", c->precisions, std::string(vla::analysis::kAtlasPrecisions));
      vla::cli::add_list_option(app, "--policies", c->policies, "clamp, skip, no-refresh, renorm");
      app.add_option("--renorm-threshold", c->renorm_threshold, "S renormalisation threshold (policy renorm)")->capture_default_str();
      vla::cli::add_mixer_options(app, c->base, {"rank", "delta_policy", "mva_levels", "next_latent"});
      app.add_option("--out", *out, "output folder")->capture_default_str();
      app.final_callback([c, out] {
        auto& ranks = vla::parallel::world();
        const auto units = vla::analysis::atlas_units(*c);
        const auto parts = vla::parallel::gather_results(
            ranks, units.size(), [&](std::size_t i) { return vla::analysis::run_atlas_unit(*c, units[i]); },
            vla::analysis::encode_cells, vla::analysis::decode_cells);
        if (!ranks.root()) return;
        std::vector<vla::analysis::AtlasCell> cells;
        for (const auto& p : parts) cells.insert(cells.end(), p.begin(), p.end());
        fmt::print("{}", vla::analysis::write_atlas(*c, cells, *out));
      });
    },
    true};

}  // namespace
