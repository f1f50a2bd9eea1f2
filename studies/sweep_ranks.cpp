#include "studies/sweep_ranks.hpp"

#include "core/io/atomic_file.hpp"
#include "core/parallel/bytes.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <sstream>

namespace vla::studies {

namespace fs = std::filesystem;
using parallel::ByteReader;
using parallel::ByteWriter;

namespace {

// The root's order to the other ranks: a sweep's distinct runs in deal order, each with whether the root's
// store already holds its outcome, or the end of the job.
enum : std::uint64_t { kEnd = 0, kSweep = 1 };

struct Unit {
  train::TrainConfig cfg;
  std::string key;
  bool done = false;  // in the root's store: dealt, not trained
};

std::string encode_order(const std::vector<Unit>& units) {
  ByteWriter w;
  w.u64(kSweep).u64(units.size());
  for (const auto& u : units) w.str(u.key).u64(u.done);
  return w.take();
}

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("cannot read '{}'", p.string()));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The progress callback with every line prefixed by the rank (the lines of all ranks share one stderr).
std::function<void(const std::string&)> prefixed(const SweepOptions& o, int rank) {
  if (!o.progress) return {};
  return [p = o.progress, rank](const std::string& line) { p(fmt::format("rank {}: {}", rank, line)); };
}

}  // namespace

std::string pack_run(const RunOutcome& out, const std::string& how) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(out.dir)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && name != "key.json" && name.find(".tmp.") == std::string::npos) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  ByteWriter w;
  w.str(how).str(out.dir.parent_path().filename().string()).u64(names.size());
  for (const auto& n : names) w.str(n).str(file_bytes(out.dir / n));
  return w.take();
}

RunFiles unpack_run(const std::string& bytes) {
  ByteReader in(bytes);
  RunFiles f;
  f.how = in.str();
  f.device = in.str();
  const std::uint64_t n = in.u64();
  for (std::uint64_t i = 0; i < n; ++i) {
    std::string name = in.str();
    f.files.emplace_back(std::move(name), in.str());
  }
  in.end();
  return f;
}

void write_run(const RunStore& store, const train::TrainConfig& c, const RunFiles& f) {
  for (const auto& [name, bytes] : f.files)
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos || name == "key.json")
      throw std::runtime_error(fmt::format("run files: refusing the file name '{}' for {}", name, RunStore::name(c)));
  const fs::path dir = store.dir(c, f.device);
  for (const auto& [name, bytes] : f.files)
    io::write_atomically(dir / name, [&b = bytes](std::ostream& os) { os.write(b.data(), std::streamsize(b.size())); }, std::ios::binary);
}

SweepResult sweep_over_ranks(const std::vector<train::TrainConfig>& runs, const RunStore& store, const SweepOptions& o) {
  parallel::Group& g = *o.ranks;
  const auto t0 = std::chrono::steady_clock::now();
  SweepResult res;
  // The distinct runs the sweep trains, longest first (ties in the order asked: sweep()'s order), each
  // with where it trains; skipped runs are reported as sweep() reports them and dealt to nobody.
  std::vector<Unit> units;
  std::map<std::string, const train::Device*> device;
  for (const auto& c : runs) {
    const std::string key = RunStore::key(c);
    if (res.outcomes.count(key) || device.count(key)) continue;
    const train::Device* d = device_for(c, o);
    if (!d) {
      res.outcomes[key] = skipped_outcome(c, o);
      ++res.skipped;
      continue;
    }
    device[key] = d;
    units.push_back({c, key, read_outcome(c, store.path(c, d->name)).status != RunOutcome::Status::Interrupted});
  }
  std::stable_sort(units.begin(), units.end(), [](const Unit& a, const Unit& b) { return run_cost(a.cfg) > run_cost(b.cfg); });
  const auto done = std::count_if(units.begin(), units.end(), [](const Unit& u) { return u.done; });
  if (o.progress)
    o.progress(fmt::format("sweep over {} ranks: {} distinct runs, {} already in the store, {} skipped, {} to train; runs dealt "
                           "round-robin, longest first",
                           g.size(), units.size() + res.skipped, done, res.skipped, units.size() - done));
  res.reused = int(done);
  g.broadcast(encode_order(units));

  SweepResult own;  // the root's share
  parallel::for_each_share(
      g, units.size(),
      [&](const std::vector<std::size_t>& share, const parallel::Emit&) {
        std::vector<train::TrainConfig> todo;
        for (std::size_t i : share)
          if (!units[i].done) todo.push_back(units[i].cfg);
        SweepOptions mine = o;
        mine.ranks = nullptr;
        mine.progress = prefixed(o, 0);
        if (!todo.empty()) own = sweep(todo, store, mine);
      },
      [&](std::size_t i, int from, std::string bytes) {
        if (from == 0) return;  // the root trains into its own store
        const RunFiles f = unpack_run(bytes);
        const std::string& expected = device.at(units[i].key)->name;
        if (f.device != expected)
          throw std::runtime_error(fmt::format("rank {} trained {} on {}, where this rank trains it on {}: start every rank with "
                                               "the same options",
                                               from, RunStore::name(units[i].cfg), f.device, expected));
        write_run(store, units[i].cfg, f);
        const RunOutcome out = read_outcome(units[i].cfg, store.path(units[i].cfg, f.device));
        res.reused += f.how == "reused";
        res.trained += f.how == "trained";
        res.resumed += f.how == "resumed";
        res.diverged += f.how != "reused" && out.status == RunOutcome::Status::Diverged;
        if (o.progress) o.progress(fmt::format("  rank {}: {} {} on {}", from, f.how, store.path(units[i].cfg, f.device).filename().string(), f.device));
      });
  res.reused += own.reused;
  res.trained += own.trained;
  res.resumed += own.resumed;
  res.diverged += own.diverged;
  for (const auto& u : units) {
    RunOutcome out = read_outcome(u.cfg, store.path(u.cfg, device.at(u.key)->name));
    res.interrupted = res.interrupted || out.status == RunOutcome::Status::Interrupted;
    res.outcomes[u.key] = std::move(out);
  }
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (o.progress && !units.empty())
    o.progress(fmt::format("sweep over {} ranks: {} in {:.1f} s", g.size(),
                           res.interrupted ? "stopped (rerun the same command to continue)" : "done", res.wall_s));
  return res;
}

void serve_sweeps(const RunStore& store, const SweepOptions& o) {
  parallel::Group& g = *o.ranks;
  for (;;) {
    const std::string order = g.broadcast("");
    ByteReader in(order);
    if (in.u64() == kEnd) return;
    std::vector<Unit> units(in.u64());
    std::map<std::string, std::size_t> index;
    for (std::size_t i = 0; i < units.size(); ++i) {
      units[i].key = in.str();
      units[i].done = in.u64() != 0;
      units[i].cfg = train::TrainConfig::from_json(nlohmann::json::parse(units[i].key));
      if (RunStore::key(units[i].cfg) != units[i].key)
        throw std::runtime_error(fmt::format("rank {}: a run's config does not read back as the root wrote it (another build of "
                                             "vla on this host?): {}",
                                             g.rank(), units[i].key));
      index[units[i].key] = i;
    }
    in.end();
    parallel::for_each_share(
        g, units.size(),
        [&](const std::vector<std::size_t>& share, const parallel::Emit& emit) {
          std::vector<train::TrainConfig> todo;
          for (std::size_t i : share)
            if (!units[i].done) todo.push_back(units[i].cfg);
          SweepOptions mine = o;
          mine.ranks = nullptr;
          mine.progress = prefixed(o, g.rank());
          mine.finished = [&](const RunOutcome& out, const std::string& how) {
            emit(index.at(RunStore::key(out.cfg)), pack_run(out, how));
          };
          if (!todo.empty()) sweep(todo, store, mine);
        },
        [](std::size_t, int, std::string) {});
  }
}

void release_ranks(parallel::Group& g) {
  if (g.size() > 1 && g.root()) g.broadcast(ByteWriter().u64(kEnd).take());
}

}  // namespace vla::studies
