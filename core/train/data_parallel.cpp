#include "core/train/data_parallel.hpp"

#include "core/parallel/bytes.hpp"
#include "core/train/cpu_engine.hpp"
#include "core/train/train_config.hpp"
#include "core/train/trainer.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <thread>

namespace vla::train {

namespace {

using model::Params;
using parallel::ByteReader;
using parallel::ByteWriter;

enum : std::uint64_t { kBatch = 1, kFinish = 2 };  // what the root broadcasts

// Raw bytes of a vector of PODs, length-prefixed by ByteWriter::str (same binary on every rank).
// An empty vector or tensor may have no storage at all (data() == nullptr): no copy then.
template <class T> std::string pod_bytes(const T* p, std::size_t n) {
  return n ? std::string(reinterpret_cast<const char*>(p), n * sizeof(T)) : std::string();
}
template <class T> void pod_read(const std::string& s, T* p, std::size_t n, const char* what) {
  if (s.size() != n * sizeof(T)) throw std::runtime_error(fmt::format("data parallel: {} has {} bytes, expected {}", what, s.size(), n * sizeof(T)));
  if (n) std::memcpy(p, s.data(), s.size());
}

void write_ints(ByteWriter& w, const std::vector<std::vector<int>>& rows) {
  w.u64(rows.size());
  for (const auto& r : rows) w.str(pod_bytes(r.data(), r.size()));
}
std::vector<std::vector<int>> read_ints(ByteReader& r) {
  std::vector<std::vector<int>> rows(r.u64());
  for (auto& row : rows) {
    const std::string s = r.str();
    if (s.size() % sizeof(int)) throw std::runtime_error("data parallel: a batch row is not a whole number of ints");
    row.resize(s.size() / sizeof(int));
    pod_read(s, row.data(), row.size(), "a batch row");
  }
  return rows;
}

// Parameters (or a gradient) with their names and shapes: the receiver needs no model to decode them.
void write_params(ByteWriter& w, const Params<float>& p) {
  w.u64(p.t.size());
  for (std::size_t i = 0; i < p.t.size(); ++i)
    w.str(p.names[i]).u64(std::uint64_t(p.t[i].rows())).u64(std::uint64_t(p.t[i].cols())).str(pod_bytes(p.t[i].data(), std::size_t(p.t[i].size())));
}
Params<float> read_params(ByteReader& r) {
  Params<float> p;
  const std::uint64_t n = r.u64();
  for (std::uint64_t i = 0; i < n; ++i) {
    p.names.push_back(r.str());
    const auto rows = Eigen::Index(r.u64()), cols = Eigen::Index(r.u64());
    p.t.emplace_back(rows, cols);
    pod_read(r.str(), p.t.back().data(), std::size_t(rows * cols), "a tensor");
  }
  return p;
}

void write_shard(ByteWriter& w, int index, const ShardResult& s, bool gradient) {
  w.i64(index).f64(s.loss).i64(s.correct).f64s(s.S).f64s(s.A).str(s.nonfinite);
  if (gradient) write_params(w, s.g);
}
ShardResult read_shard(ByteReader& r, int& index, bool gradient) {
  ShardResult s;
  index = int(r.i64());
  s.loss = r.f64();
  s.correct = int(r.i64());
  s.S = r.f64s();
  s.A = r.f64s();
  s.nonfinite = r.str();
  if (gradient) s.g = read_params(r);
  return s;
}

// This rank's shards of kShards: r, r + N, ...
std::vector<int> my_shards(int rank, int size) {
  std::vector<int> s;
  for (int i = rank; i < kShards; i += size) s.push_back(i);
  return s;
}

// What a worker answers: ok (then its shards) or the error its shards threw.
enum : std::uint64_t { kShardsOk = 1, kShardsFailed = 2 };

BatchResult root_batch(parallel::Group& g, const std::string& config_json, const model::ModelConfig& cfg, const Params<float>& p,
                       const Batch& b, Params<float>* grad, int threads) {
  const bool gradient = grad != nullptr;
  ByteWriter w;
  w.u64(kBatch).str(config_json).u64(gradient);
  write_params(w, p);
  write_ints(w, b.tokens);
  write_ints(w, b.targets);
  g.broadcast(w.take());
  std::vector<ShardResult> shards(kShards);
  const auto mine = my_shards(0, g.size());
  std::exception_ptr local_error;  // kept until every worker has answered: no reply is left for the next batch
  try {
    auto local = shard_gradients(cfg, p, b, mine, gradient, threads);
    for (std::size_t j = 0; j < mine.size(); ++j) shards[std::size_t(mine[j])] = std::move(local[j]);
  } catch (...) {
    local_error = std::current_exception();
  }
  // The workers' shards, as they arrive (poll never blocks: sleep between looks, leaving the core).
  int waiting = 0;
  for (int r = 1; r < g.size(); ++r) waiting += r < kShards;
  std::string failure;
  while (waiting > 0) {
    auto m = g.poll();
    if (!m) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      continue;
    }
    --waiting;
    ByteReader rd(m->second);
    if (rd.u64() == kShardsFailed) {
      if (failure.empty()) failure = fmt::format("rank {}: {}", m->first, rd.str());
      continue;
    }
    for (const int i : my_shards(m->first, g.size())) {
      int index = -1;
      ShardResult s = read_shard(rd, index, gradient);
      if (index != i) throw std::runtime_error(fmt::format("data parallel: rank {} sent shard {}, expected {}", m->first, index, i));
      shards[std::size_t(i)] = std::move(s);
    }
  }
  if (local_error) std::rethrow_exception(local_error);
  if (!failure.empty()) throw std::runtime_error("data parallel: a worker failed, " + failure);
  return reduce_shards(cfg, shards, b, grad);
}

}  // namespace

Device data_parallel_device(parallel::Group& group) {
  if (group.size() == 1) return cpu_device();
  if (!group.root()) throw std::logic_error("data_parallel_device: the root runs the loop, the other ranks serve_data_parallel");
  return {.name = "cpu",
          .make = [&group](const TrainConfig& c, const RunOptions& ro) -> std::unique_ptr<StepEngine> {
            const std::string json = c.to_json().dump();
            return make_cpu_engine(c, ro.threads,
                                   [&group, json](const model::ModelConfig& cfg, const Params<float>& p, const Batch& b,
                                                  Params<float>* grad, int threads) {
                                     return root_batch(group, json, cfg, p, b, grad, threads);
                                   });
          },
          .check = {},
          .run_many = {}};
}

void serve_data_parallel(parallel::Group& group, int threads) {
  if (group.root()) throw std::logic_error("serve_data_parallel: the root runs the training loop");
  const auto mine = my_shards(group.rank(), group.size());
  for (;;) {
    const std::string msg = group.broadcast({});
    ByteReader r(msg);
    const std::uint64_t kind = r.u64();
    if (kind == kFinish) return;
    if (kind != kBatch) throw std::runtime_error(fmt::format("data parallel: unknown message kind {}", kind));
    const std::string json = r.str();
    const bool gradient = r.u64() != 0;
    const Params<float> p = read_params(r);
    Batch b;
    b.tokens = read_ints(r);
    b.targets = read_ints(r);
    if (mine.empty()) continue;  // more ranks than shards: nothing to do, nothing to send
    ByteWriter w;
    try {
      const TrainConfig c = TrainConfig::from_json(nlohmann::json::parse(json));
      const auto shards = shard_gradients(c.model, p, b, mine, gradient, threads);
      w.u64(kShardsOk);
      for (std::size_t j = 0; j < mine.size(); ++j) write_shard(w, mine[j], shards[j], gradient);
    } catch (const std::exception& e) {
      w = ByteWriter();
      w.u64(kShardsFailed).str(e.what());
    }
    group.send(0, w.take());
  }
}

void finish_data_parallel(parallel::Group& group) {
  if (group.size() > 1 && group.root()) group.broadcast(ByteWriter().u64(kFinish).take());
}

}  // namespace vla::train
