#pragma once
// The sweep split over the processes of a job (`mpirun -np N vla study run ...`; core/parallel/group.hpp,
// docs/parallel.md). Only the root plans (the runner, which may read earlier studies' outputs that only
// the root's filesystem holds) and summarises; each sweep's distinct runs, longest first, are dealt
// round-robin over the ranks (parallel::share_of), the runs finished in the root's store left out of
// the training but not of the deal, so that a rerun gives every rank the same runs. Each rank trains
// its share through the ordinary sweep into its own run store at the same path (on a shared filesystem
// that is the root's store; on a host of its own, its local copy, where a rerun finds its checkpoints)
// and sends every finished run's files (summary.json, log.csv, checkpoint.bin, diverged.json) to the
// root, which writes them into its store as they arrive. The root's outputs are then those of a single
// process, byte for byte but for measured times; a rank that dies loses only its unfinished runs.
#include "studies/sweep.hpp"

namespace vla::studies {

// At the root, with o.ranks of several processes: what sweep() does (sweep() calls it).
SweepResult sweep_over_ranks(const std::vector<train::TrainConfig>& runs, const RunStore& store, const SweepOptions& o);

// At every other rank of o.ranks: trains this rank's share of each sweep the root starts, until the
// root calls release_ranks. `store`: this rank's run store (the same path as the root's).
void serve_sweeps(const RunStore& store, const SweepOptions& o);

// At the root, once no sweep follows: every serve_sweeps returns.
void release_ranks(parallel::Group& g);

// What a rank sends for a finished run: how it finished ("reused", "trained", "resumed"), the device
// folder it is in, and its files (every file in the run's folder but key.json, which the root's store
// writes itself), by name in name order.
struct RunFiles {
  std::string how, device;
  std::vector<std::pair<std::string, std::string>> files;  // (name, bytes)
};
std::string pack_run(const RunOutcome& out, const std::string& how);
RunFiles unpack_run(const std::string& bytes);
// Writes the files into the run's folder of `store` (created, key checked, as RunStore::dir does), each
// atomically; a file name with a path separator, "." or ".." is refused (std::runtime_error).
void write_run(const RunStore& store, const train::TrainConfig& c, const RunFiles& f);

}  // namespace vla::studies
