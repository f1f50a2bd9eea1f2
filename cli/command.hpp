#pragma once
// Subcommands of `vla` register themselves: each cli/commands/<name>.cpp defines one
// `static const vla::cli::RegisterCommand reg{...}` and is compiled straight into the executable,
// so adding a command never touches main.cpp.
#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace vla::cli {

struct Command {
  std::string name;
  std::string help;
  std::function<void(CLI::App&)> setup;  // adds options and a final_callback to the subcommand
  // Splits its work over the ranks of an MPI launcher (core/parallel/group.hpp); every other command is
  // refused there, since each rank would run it whole.
  bool splits_over_ranks = false;
};

inline std::vector<Command>& registry() {
  static std::vector<Command> commands;
  return commands;
}

struct RegisterCommand {
  RegisterCommand(std::string name, std::string help, std::function<void(CLI::App&)> setup, bool splits_over_ranks = false) {
    registry().push_back({std::move(name), std::move(help), std::move(setup), splits_over_ranks});
  }
};

}  // namespace vla::cli
