#pragma once
// What the sweep tests share (tests/studies/sweep_test.cpp, sweep_ranks_test.cpp): a tiny training
// config (d = 8, 6 steps: milliseconds), a scratch folder, a file's bytes, sweep options on one thread.
#include "studies/sweep.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace vla::test {

namespace fs = std::filesystem;
using studies::SweepOptions;

inline train::TrainConfig tiny(const std::string& mixer, std::uint64_t seed, int pairs = 3) {
  train::TrainConfig c;
  c.model.d_model = 8; c.model.heads = 2; c.model.d_head = 4; c.model.ffn = 16; c.model.max_len = 32;
  c.model.mixer.mixer = mixer;
  c.task.pairs = pairs;
  c.steps = 6; c.batch = 4; c.seed = seed; c.eval_batches = 1; c.eval_batch = 8; c.eval_every = 2; c.checkpoint_every = 2;
  return c;
}

struct Scratch {
  fs::path path;
  explicit Scratch(const std::string& tag) : path(fs::temp_directory_path() / ("vla_sweep_test_" + tag + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

inline std::string bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline SweepOptions options(std::vector<std::string>* lines = nullptr) {
  SweepOptions o;
  o.threads = 1;
  if (lines) o.progress = [lines](const std::string& l) { lines->push_back(l); };
  return o;
}

}  // namespace vla::test
