#pragma once
// Data-parallel training of one model over the ranks of a parallel::Group (`mpirun -np N vla train
// --data-parallel`: MPI processes on one host or several).
//
// The root runs the training loop (trainer.hpp) on data_parallel_device(group); every other rank runs
// serve_data_parallel(group) until the root calls finish_data_parallel. At each batch the root sends
// every rank the run's config, the current parameters and the batch; rank r computes the batch's shards
// r, r + N, r + 2N, ... of cpu_engine.hpp's kShards fixed shards on its own threads and sends them to the
// root; the root adds the kShards shards in shard order (reduce_shards), which is what one process does.
// So an N-rank run is the one-process CPU run bit for bit (same binary): the same log, checkpoint and
// summary, under the same device name "cpu", and either resumes the other's checkpoint.
//
// The workers keep no state between batches (the parameters come with each one), so the root alone owns
// the loop's files, SIGINT, --stop-after and resume, and a worker never has to agree with it on when
// to stop. What it costs: every batch sends the parameters to each of the N - 1 workers and the
// gradients of the workers' shards back, kShards (N - 1) / N parameter-sized messages; for a wide model
// the wire dominates, and an all-reduce of one gradient per rank (the NCCL plan of docs/parallel.md)
// replaces it, exact only where the reduction order is fixed. At most kShards ranks have work: a larger
// group leaves the others idle.
#include "core/parallel/group.hpp"
#include "core/train/step_engine.hpp"

namespace vla::train {

// The device "cpu" whose batches are computed over `group` (its root must be this rank). group must
// outlive every engine it makes. In a group of one it is cpu_device().
Device data_parallel_device(parallel::Group& group);

// A worker rank (not the root): computes the shards the root asks for, on `threads` threads (0: all
// cores), until the root calls finish_data_parallel. Errors in a shard go back to the root, which
// throws them; a broken message throws here.
void serve_data_parallel(parallel::Group& group, int threads);

// The root: ends every worker's serve_data_parallel. Call it once, after the last run, also when the
// run failed (the workers would otherwise wait for the next batch forever).
void finish_data_parallel(parallel::Group& group);

}  // namespace vla::train
