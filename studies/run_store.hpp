#pragma once
// The run store: one folder per training run, keyed by the run's whole configuration (TrainConfig's
// JSON: model, mixer knobs, task, optimiser, steps, seed, evaluation and checkpoint cadence) and the
// device it trains on, so that studies asking for the same run share it and no run is trained twice.
// Layout: <root>/<device>/<readable name>-<hash>/ holding the trainer's files (summary.json, log.csv,
// checkpoint.bin) and key.json (the key: read back to rule out a hash collision). Measurements other than
// training (the latency study's timings) are cached the same way under <root>/<device>/<kind>-<hash>/.
#include "core/train/train_config.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

namespace vla::studies {

class RunStore {
 public:
  explicit RunStore(std::filesystem::path root) : root_(std::move(root)) {}
  const std::filesystem::path& root() const { return root_; }

  // The run's key: its configuration as canonical JSON (sorted keys), without the device.
  static std::string key(const train::TrainConfig& c);
  // A readable folder name: task, n or T, mixer, d_head, seed, steps, lr, ood.
  static std::string name(const train::TrainConfig& c);
  // Where the run's folder for `device` is (nothing is created).
  std::filesystem::path path(const train::TrainConfig& c, const std::string& device) const;
  // The run's folder for `device`; creates it and writes key.json on first use. Throws std::runtime_error
  // if the folder holds another key (a hash collision: never silently share a folder).
  std::filesystem::path dir(const train::TrainConfig& c, const std::string& device) const;
  // The run's folder for `device` as the store holds it, for reading only: nothing is created; the same
  // collision rule where its key.json exists.
  std::filesystem::path existing(const train::TrainConfig& c, const std::string& device) const;
  // A cached measurement's folder, keyed by `key` (same collision rule).
  std::filesystem::path cache_dir(const std::string& kind, const nlohmann::json& key, const std::string& device) const;

 private:
  std::filesystem::path claim(const std::filesystem::path& dir, const std::string& key, bool create = true) const;
  std::filesystem::path root_;
};

// 64-bit FNV-1a of a string, as 12 hex digits (folder names).
std::string short_hash(const std::string& s);

}  // namespace vla::studies
