// `vla claims`: the claims ledger (analysis/claims.hpp). Runs every registered claim's measurement,
// prints the table, and writes the markdown / JSON reports and the plots they refer to.
#include "analysis/claims.hpp"
#include "cli/command.hpp"
#include "cli/list_option.hpp"
#include "core/io/atomic_file.hpp"

#include <fmt/format.h>

namespace {

struct Args {
  vla::analysis::ClaimsConfig cfg;
  std::string json, markdown;
};

const vla::cli::RegisterCommand reg{
    "claims", "the claims ledger: measure the paper's and spec 001's quantitative claims, with verdicts",
    [](CLI::App& app) {
      auto a = std::make_shared<Args>();
      app.add_flag("--quick", a->cfg.quick, "the `make run` budget (< 1 minute on 2 cores): shorter T, fewer n");
      app.add_option("--out", a->cfg.out_dir, "folder for the plots and CSVs (written to <out>/claims/)")->capture_default_str();
      app.add_option("--json", a->json, "write the ledger as JSON to this file");
      app.add_option("--markdown", a->markdown, "write the ledger as markdown to this file (plots linked relative to --out)");
      vla::cli::add_list_option(app, "--only", a->cfg.only, "run only these claim ids (others are listed as not selected)");
      app.final_callback([a] {
        const auto r = vla::analysis::run_claims(a->cfg);
        fmt::print("{}", vla::analysis::claims_table(r));
        if (!a->markdown.empty()) {
          vla::io::write_text_atomically(a->markdown, vla::analysis::claims_markdown(a->cfg, r));
          fmt::print("wrote {}\n", a->markdown);
        }
        if (!a->json.empty()) {
          vla::io::write_text_atomically(a->json, vla::analysis::claims_json(a->cfg, r));
          fmt::print("wrote {}\n", a->json);
        }
      });
    }};

}  // namespace
