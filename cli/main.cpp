// The `vla` executable: one subcommand per job (vla --help lists them, vla CMD --help explains each).
// Errors: a bad argument or bad input prints "vla: error: ..." naming the parameter and exits 2, whether
// the toolkit or the parser (CLI11: an unknown flag, a missing value, a value of the wrong type) finds
// it; a failure while running exits 1. Nothing is left half-written (core/io/atomic_file.hpp).
// Launched by an MPI launcher (mpirun), the process joins the job's ranks first (core/parallel/group.hpp):
// the commands that split their work do so, the others are refused, and an error on any rank ends every
// rank with its exit status.
#include "cli/command.hpp"
#include "core/io/provenance.hpp"
#include "core/parallel/group.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <stdexcept>

namespace {

int run(int argc, char** argv) {
  CLI::App app{"vla: numerical research toolkit for the stability and capacity of linear-attention memories "
               "(Variational Linear Attention and its baselines)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("vla ") + VLA_VERSION + " (" + vla::io::git_revision() + ")");
  auto& commands = vla::cli::registry();
  std::sort(commands.begin(), commands.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  for (const auto& c : commands) {
    auto* sub = app.add_subcommand(c.name, c.help);
    c.setup(*sub);
    if (!c.splits_over_ranks) sub->preparse_callback([name = c.name](std::size_t) { vla::parallel::require_one_process("vla " + name); });
  }
  // Under a launcher with several ranks every message names its rank (they share one terminal).
  const std::string rank = vla::parallel::world().size() > 1 ? fmt::format("rank {}: ", vla::parallel::world().rank()) : "";
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::fprintf(stderr, "vla: error: %s%s\nRun with --help for more information.\n", rank.c_str(), e.what());
    return 2;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "vla: error: %s%s\n", rank.c_str(), e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vla: failed: %s%s\n", rank.c_str(), e.what());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::unique_ptr<vla::parallel::Session> session;
  try {
    session = std::make_unique<vla::parallel::Session>(argc, argv);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "vla: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vla: failed: %s\n", e.what());
    return 1;
  }
  const int code = run(argc, argv);
  if (code != 0 && session->group().size() > 1) session->group().abort(code);  // the other ranks may wait for this one
  return code;
}
