// The `vla` executable: one subcommand per job (vla --help lists them, vla CMD --help explains each).
// Errors: a bad argument or bad input prints "vla: error: ..." naming the parameter and exits 2, whether
// the toolkit or the parser (CLI11: an unknown flag, a missing value, a value of the wrong type) finds
// it; a failure while running exits 1. Nothing is left half-written (core/io/atomic_file.hpp).
#include "cli/command.hpp"
#include "core/io/provenance.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <stdexcept>

int main(int argc, char** argv) {
  CLI::App app{"vla: numerical research toolkit for the stability and capacity of linear-attention memories "
               "(Variational Linear Attention and its baselines)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("vla ") + VLA_VERSION + " (" + vla::io::git_revision() + ")");
  auto& commands = vla::cli::registry();
  std::sort(commands.begin(), commands.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  for (const auto& c : commands) c.setup(*app.add_subcommand(c.name, c.help));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::fprintf(stderr, "vla: error: %s\nRun with --help for more information.\n", e.what());
    return 2;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "vla: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vla: failed: %s\n", e.what());
    return 1;
  }
  return 0;
}
