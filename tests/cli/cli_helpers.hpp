#pragma once
// Helpers for tests that run the `vla` executable: a scratch folder, random layer parameters written
// as .npy, and running a command line capturing its exit code and output.
#include "core/io/npy.hpp"
#include "core/layers/mixer_weights.hpp"
#include "tests/build_paths.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <cstring>
#include <random>
#include <sstream>
#include <initializer_list>
#include <string>
#include <string_view>

#include <sys/wait.h>
#include <unistd.h>

namespace vla::test {

namespace fs = std::filesystem;

inline const std::string kVla = (binary_dir() / "bin" / "vla").string();

// A fresh folder under the system temp dir, removed when the object dies.
struct ScratchDir {
  fs::path path;
  explicit ScratchDir(const std::string& tag) {
    static int counter = 0;
    path = fs::temp_directory_path() / fmt::format("vla-test-{}-{}-{}", tag, ::getpid(), counter++);
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
  // Every entry in the folder (to check that nothing, not even a temp file, was left behind).
  std::vector<std::string> entries() const {
    std::vector<std::string> r;
    for (const auto& e : fs::directory_iterator(path)) r.push_back(e.path().filename().string());
    return r;
  }
};

struct RunResult {
  int exit_code;
  std::string output;  // stdout and stderr together
};

inline RunResult run_command(const std::string& cmd) {
  const std::string log = fs::temp_directory_path() / fmt::format("vla-test-log-{}", ::getpid());
  const int status = std::system((cmd + " > '" + log + "' 2>&1").c_str());
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  fs::remove(log);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ss.str()};
}

// `vla ARGS --out <scratch>/out` refused while parsing: exit 2, the output naming each of `must_mention`,
// and no output folder made (nothing ran). Catch2 checks: call it inside a TEST_CASE.
inline void check_refused(const std::string& args, std::initializer_list<std::string_view> must_mention) {
  ScratchDir dir{"refused"};
  const auto r = run_command(fmt::format("{} {} --out {}", kVla, args, dir / "out"));
  INFO(args);
  INFO(r.output);
  CHECK(r.exit_code == 2);
  for (const std::string_view m : must_mention) CHECK(r.output.find(m) != std::string::npos);
  CHECK_FALSE(fs::exists(dir.path / "out"));
}
inline void check_refused(const std::string& args, const std::string& must_mention) { check_refused(args, {must_mention}); }

// The bytes of a file ("" if it cannot be read).
inline std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The step stored in a checkpoint, after checking its magic (core/train/checkpoint.hpp: magic "VLACKPT2", u64 length of
// the config JSON, the JSON, i64 step, f64 wall time, ..., the u32 checksum). Also returns the wall time's byte offset.
struct CheckpointHead {
  std::int64_t step = -1;
  std::size_t wall_offset = 0;
};
inline CheckpointHead checkpoint_head(const std::string& bytes) {
  CheckpointHead h;
  if (bytes.size() < 16 || bytes.compare(0, 8, "VLACKPT2") != 0) return h;
  std::uint64_t js = 0;
  std::memcpy(&js, bytes.data() + 8, 8);
  const std::size_t at = 16 + js;
  if (bytes.size() < at + 16) return h;
  std::memcpy(&h.step, bytes.data() + at, 8);
  h.wall_offset = at + 8;
  return h;
}

// A checkpoint's bytes with the wall time it stores and the checksum over it (its last 4 bytes) zeroed:
// the two fields that differ between two processes making the same run; "" if it is not a checkpoint.
inline std::string checkpoint_without_time(std::string ck) {
  const auto h = checkpoint_head(ck);
  if (h.wall_offset == 0) return "";
  std::memset(ck.data() + h.wall_offset, 0, 8);
  std::memset(ck.data() + ck.size() - 4, 0, 4);
  return ck;
}

// Random N(0, scale^2) matrix (rows, cols), deterministic in the generator: the toolkit's own draw.
inline Mat<double> gaussian(std::mt19937_64& g, long rows, long cols, double scale) {
  return gaussian_matrix(g, static_cast<int>(rows), static_cast<int>(cols), scale);
}

// Writes Wq, Wk, Wv (d_head, d_model), Wu (rank*d_head, d_head), Wg (1, d_model), Wo (d_model, d_head)
// and, when `biases`, every bias as a 1-D array; N(0, 1/fan_in) weights, N(0, 0.1^2) biases.
inline void write_random_params(const fs::path& dir, int d_model, int d_head, int rank, std::uint64_t seed,
                                bool biases) {
  std::mt19937_64 g(seed);
  fs::create_directories(dir);
  auto w = [&](const char* name, long r, long c, double fan_in) {
    io::write_npy(dir / (std::string(name) + ".npy"), gaussian(g, r, c, 1.0 / std::sqrt(fan_in)));
  };
  w("Wq", d_head, d_model, d_model);
  w("Wk", d_head, d_model, d_model);
  w("Wv", d_head, d_model, d_model);
  w("Wu", long(rank) * d_head, d_head, d_head);
  w("Wg", 1, d_model, d_model);
  w("Wo", d_model, d_head, d_head);
  if (biases) {
    auto b = [&](const char* name, long n) { io::write_npy(dir / (std::string(name) + ".npy"), gaussian(g, n, 1, 0.1), 1); };
    b("bq", d_head);
    b("bk", d_head);
    b("bv", d_head);
    b("bu", long(rank) * d_head);
    b("bg", 1);
    b("bo", d_model);
  }
}

}  // namespace vla::test
