#pragma once
// The processes one job is split over, and the one way the toolkit splits work between them: a list of
// independent units (training runs, atlas cells, Jacobian series) dealt round-robin over the ranks, each
// unit's result sent to the root as soon as it exists (docs/parallel.md).
//
// `Group` is the interface the splitting needs (rank, size, a message to the root, a message from
// anyone, a broadcast, abort). MPI implements it (core/parallel/mpi_group.cpp) when the binary is built
// with MPI and launched by an MPI launcher; otherwise the process is a group of one and nothing below
// sends anything. Another engine (a job queue, a multi-host scheduler) implements the same interface.
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace vla::parallel {

class Group {
 public:
  virtual ~Group() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_rank() const = 0;  // rank among the processes on this host
  virtual int local_size() const = 0;
  bool root() const { return rank() == 0; }
  // Point to point: `bytes` to rank `to` (returns once the bytes may be reused).
  virtual void send(int to, const std::string& bytes) = 0;
  // A message sent to this rank by send(), if one has arrived: (from, bytes). Never blocks.
  virtual std::optional<std::pair<int, std::string>> poll() = 0;
  // The root's `bytes` at every rank (ignored at the others). Blocks until the root sends, sleeping, not
  // spinning: a rank waiting for work leaves its core to the ranks that have some.
  virtual std::string broadcast(const std::string& bytes) = 0;
  // Ends every rank of the job with exit status `code`: after an error on one rank the others would
  // otherwise wait for it forever. What was written before (atomically) stays.
  [[noreturn]] virtual void abort(int code) = 0;
};

// The group this process belongs to: the Session's, or a group of one when there is no Session (tests,
// notebooks, a library user).
Group& world();

// Joins the job's MPI world when this process was launched by an MPI launcher (launched_by_mpi) in a
// build with MPI, and leaves it (MPI_Finalize) when destroyed; a group of one otherwise, MPI never
// initialised. Create it first thing in main, before anything touches CUDA: under a launcher it gives each
// rank one GPU (gpu_for_local_rank) through CUDA_VISIBLE_DEVICES. Throws std::invalid_argument when
// launched by a launcher with several ranks in a build without MPI (every rank would run the whole job).
class Session {
 public:
  Session(int& argc, char**& argv);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  Group& group() { return *group_; }

 private:
  std::unique_ptr<Group> group_;
};

// Whether this build can join an MPI job (VLA_ENABLE_MPI found MPI).
bool built_with_mpi();
// Whether the environment says an MPI launcher started this process: OMPI_COMM_WORLD_SIZE (Open MPI),
// PMI_SIZE (MPICH, Slurm's PMI) or PMIX_RANK (PMIx launchers). `env` looks a variable up (nullptr: unset).
bool launched_by_mpi(const std::function<const char*(const char*)>& env);

// The CUDA_VISIBLE_DEVICES value that gives the process of local rank `local_rank` its GPU: entry
// local_rank mod k of `visible` (k entries, comma-separated) when it is set, else device local_rank mod
// `gpus`; "" (leave it alone: a CPU rank) when there is no GPU.
std::string gpu_for_local_rank(int local_rank, const std::string& visible, int gpus);

// Refuses (std::invalid_argument) to run `what` in a group of more than one process: for the commands
// that do not split their work, which every rank would otherwise run whole, writing the same files.
void require_one_process(const std::string& what);

// ---- splitting independent units over the ranks ----

// This rank's units of 0..n-1: unit i goes to rank i mod size. The caller orders the units (longest
// first), so that ranks get similar loads; the deal depends on n and size only, so a rerun of the same
// job gives every rank the same units (a rank finds its unfinished work, e.g. a checkpoint, where it left it).
std::vector<std::size_t> share_of(std::size_t n, int rank, int size);

// emit(unit, bytes): a finished unit's result; callable from any thread.
using Emit = std::function<void(std::size_t unit, std::string bytes)>;

// Every rank calls work(share, emit) with its share (in unit order), on a thread of its own; each result
// it emits travels to the root at once, where take(unit, from_rank, bytes) is called on the calling
// thread (the root's own results too). Returns at every rank when every rank's work has returned; an
// exception from work is rethrown on its rank. A rank that dies has delivered every result it emitted
// before. In a group of one: work on the calling thread, take called from emit.
void for_each_share(Group& g, std::size_t n, const std::function<void(const std::vector<std::size_t>&, const Emit&)>& work,
                    const std::function<void(std::size_t unit, int from, std::string bytes)>& take);

// A unit's estimated cost, for the deal (larger first); empty: the units in their own order.
using Cost = std::function<double(std::size_t unit)>;

// The common case: f(unit) computed for every unit of this rank's share, one after another; the root
// gets every unit's bytes in unit order (the other ranks an empty vector). With `cost` the units are
// dealt in decreasing cost (ties by unit), so that ranks get similar loads.
std::vector<std::string> gather_units(Group& g, std::size_t n, const std::function<std::string(std::size_t)>& f,
                                      const Cost& cost = {});

// gather_units with typed results: f(unit) -> R, carried between ranks as encode(R) -> bytes and
// decode(bytes) -> R (a round trip that must be exact, so that the root's results do not depend on the
// number of ranks). The root gets all n in unit order, the other ranks none.
template <class F, class Encode, class Decode>
auto gather_results(Group& g, std::size_t n, F f, Encode encode, Decode decode, const Cost& cost = {}) {
  std::vector<decltype(decode(std::string()))> out;
  for (const auto& b : gather_units(g, n, [&](std::size_t i) { return encode(f(i)); }, cost)) out.push_back(decode(b));
  return out;
}

}  // namespace vla::parallel
