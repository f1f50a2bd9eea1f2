#include "studies/run_store.hpp"

#include "core/io/atomic_file.hpp"

#include <fmt/format.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace vla::studies {

namespace fs = std::filesystem;

std::string short_hash(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return fmt::format("{:012x}", h & 0xffffffffffffULL);
}

std::string RunStore::key(const train::TrainConfig& c) { return c.to_json().dump(); }  // nlohmann sorts keys

std::string RunStore::name(const train::TrainConfig& c) {
  std::string s = c.task.task == "mqar" ? fmt::format("mqar-n{}", c.task.pairs) : fmt::format("{}-T{}", c.task.task, c.task.length());
  if (c.task.task == "mqar" && c.task.length() > 3 * c.task.pairs + 1) s += fmt::format("-T{}", c.task.length());
  s += fmt::format("-{}-dh{}-s{}-{}st-lr{:g}", c.model.mixer.mixer, c.model.d_head, c.seed, c.steps, c.opt.lr);
  if (c.ood) s += "-ood";
  return s;
}

fs::path RunStore::claim(const fs::path& dir, const std::string& key, bool create) const {
  const fs::path k = dir / "key.json";
  if (fs::exists(k)) {
    std::ifstream in(k);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string have = ss.str();
    while (!have.empty() && (have.back() == '\n' || have.back() == '\r')) have.pop_back();
    if (have != key)
      throw std::runtime_error(fmt::format("run store: '{}' holds another run's key (hash collision or an edited key.json); "
                                           "move it away to rerun", dir.string()));
    return dir;
  }
  if (!create) return dir;
  fs::create_directories(dir);
  io::write_text_atomically(k, key + "\n");
  return dir;
}

fs::path RunStore::path(const train::TrainConfig& c, const std::string& device) const {
  return root_ / device / fmt::format("{}-{}", name(c), short_hash(key(c)));
}

fs::path RunStore::dir(const train::TrainConfig& c, const std::string& device) const { return claim(path(c, device), key(c)); }

fs::path RunStore::existing(const train::TrainConfig& c, const std::string& device) const {
  return claim(path(c, device), key(c), false);
}

fs::path RunStore::cache_dir(const std::string& kind, const nlohmann::json& key, const std::string& device) const {
  const std::string k = key.dump();
  return claim(root_ / device / fmt::format("{}-{}", kind, short_hash(k)), k);
}

}  // namespace vla::studies
