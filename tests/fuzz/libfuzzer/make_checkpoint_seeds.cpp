// Seed corpus for the checkpoint libFuzzer target: the valid checkpoints the mutation test starts from
// (tests/fuzz/checkpoint_files.hpp: three small configs, each written by a tiny training run), in
// format 2 and in format 1. Usage: checkpoint_seeds DIR
#include "tests/fuzz/checkpoint_files.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: checkpoint_seeds DIR\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  int n = 0;
  for (const auto& file : vla::fuzz::valid_checkpoints()) {
    auto frame = vla::fuzz::CheckpointFrame::of(file);
    frame.version = '1';
    std::ofstream(dir / fmt::format("checkpoint{}_v2.bin", n), std::ios::binary) << file;
    std::ofstream(dir / fmt::format("checkpoint{}_v1.bin", n), std::ios::binary) << frame.bytes();
    ++n;
  }
  std::printf("%d seed files in %s\n", 2 * n, dir.c_str());
  return 0;
}
