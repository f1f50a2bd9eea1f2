// `vla report`: OUT/REPORT.md (studies/report.hpp): the claims ledger, run again here (quick unless
// --full-ledger) so that its training claims read the studies' current verdicts, and every study's
// section from OUT/<id>/. Also rewrites OUT/claims.md and OUT/claims.json, as `make run` does.
#include "cli/command.hpp"
#include "core/io/atomic_file.hpp"
#include "studies/report.hpp"

#include <fmt/format.h>

namespace {

struct Args {
  std::string out = "reports";
  bool full_ledger = false;
};

const vla::cli::RegisterCommand reg{
    "report", "OUT/REPORT.md: the claims ledger and every study's section with its plots, and a summary from the computed verdicts",
    [](CLI::App& app) {
      auto a = std::make_shared<Args>();
      app.add_option("--out", a->out, "the folder of the studies (OUT/<id>/) and of the report")->capture_default_str();
      app.add_flag("--full-ledger", a->full_ledger, "run the ledger at full size (norms to T = 10^5: ~30 s more) instead of --quick");
      app.final_callback([a] {
        vla::analysis::ClaimsConfig cfg;
        cfg.quick = !a->full_ledger;
        cfg.out_dir = a->out;
        const auto claims = vla::analysis::run_claims(cfg);
        vla::io::write_text_atomically(cfg.out_dir / "claims.md", vla::analysis::claims_markdown(cfg, claims));
        vla::io::write_text_atomically(cfg.out_dir / "claims.json", vla::analysis::claims_json(cfg, claims));
        vla::io::write_text_atomically(cfg.out_dir / "REPORT.md", vla::studies::report_markdown(cfg, claims));
        fmt::print("wrote {0}/REPORT.md, {0}/claims.md, {0}/claims.json\n", a->out);
      });
    }};

}  // namespace
