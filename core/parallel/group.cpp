#include "core/parallel/group.hpp"

#include "core/parallel/bytes.hpp"
#include "core/parallel/mpi_group.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <filesystem>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <thread>

namespace vla::parallel {

namespace {

class OneProcess final : public Group {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  void send(int to, const std::string&) override {
    throw std::logic_error(fmt::format("parallel: send to rank {} in a group of one", to));
  }
  std::optional<std::pair<int, std::string>> poll() override { return std::nullopt; }
  std::string broadcast(const std::string& bytes) override { return bytes; }
  [[noreturn]] void abort(int code) override { std::exit(code); }
};

Group* g_world = nullptr;

// GPUs the NVIDIA driver lists (one folder each), read without initialising CUDA: CUDA_VISIBLE_DEVICES is
// only read when CUDA starts, so the choice must be made before.
[[maybe_unused]] int nvidia_gpu_count() {
  std::error_code ec;
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/driver/nvidia/gpus", ec)) n += e.is_directory(ec);
  return n;
}

// What a rank sends the root in for_each_share: a result, or that its work has returned.
enum : std::uint64_t { kResult = 1, kDone = 2 };

}  // namespace

Group& world() {
  static OneProcess one;
  return g_world ? *g_world : one;
}

bool built_with_mpi() {
#ifdef VLA_HAVE_MPI
  return true;
#else
  return false;
#endif
}

bool launched_by_mpi(const std::function<const char*(const char*)>& env) {
  return env("OMPI_COMM_WORLD_SIZE") || env("PMI_SIZE") || env("PMIX_RANK");
}

std::string gpu_for_local_rank(int local_rank, const std::string& visible, int gpus) {
  if (local_rank < 0) throw std::invalid_argument(fmt::format("local rank: must be >= 0, got {}", local_rank));
  if (!visible.empty()) {
    std::vector<std::string> ids;
    std::size_t at = 0;
    for (;;) {
      const std::size_t comma = visible.find(',', at);
      ids.push_back(visible.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
    return ids[std::size_t(local_rank) % ids.size()];
  }
  return gpus > 0 ? std::to_string(local_rank % gpus) : "";
}

Session::Session(int& argc, char**& argv) {
  const auto env = [](const char* k) { return static_cast<const char*>(std::getenv(k)); };
  if (launched_by_mpi(env)) {
#ifdef VLA_HAVE_MPI
    group_ = make_mpi_group(argc, argv);
    const char* visible = env("CUDA_VISIBLE_DEVICES");
    const std::string gpu = gpu_for_local_rank(group_->local_rank(), visible ? visible : "", nvidia_gpu_count());
    if (!gpu.empty()) ::setenv("CUDA_VISIBLE_DEVICES", gpu.c_str(), 1);
#else
    (void)argc;
    (void)argv;
    const char* n = env("OMPI_COMM_WORLD_SIZE") ? env("OMPI_COMM_WORLD_SIZE") : env("PMI_SIZE");
    if (!n || std::string(n) != "1")
      throw std::invalid_argument(
          "this vla was built without MPI, so it cannot split work over the processes of an MPI launcher (each would run "
          "the whole job): run it without mpirun, or rebuild with MPI (Debian: libopenmpi-dev; CMake option VLA_ENABLE_MPI)");
#endif
  }
  if (!group_) group_ = std::make_unique<OneProcess>();
  g_world = group_.get();
}

Session::~Session() {
  g_world = nullptr;
  group_.reset();
}

void require_one_process(const std::string& what) {
  if (world().size() > 1)
    throw std::invalid_argument(fmt::format("{} runs in one process, not split over the {} ranks of an MPI launcher: run it "
                                            "without mpirun (`vla study run`, `vla precision-atlas` and `vla jacobian` split)",
                                            what, world().size()));
}

std::vector<std::size_t> share_of(std::size_t n, int rank, int size) {
  if (size < 1 || rank < 0 || rank >= size) throw std::invalid_argument(fmt::format("share_of: rank {} of {}", rank, size));
  std::vector<std::size_t> s;
  for (std::size_t i = std::size_t(rank); i < n; i += std::size_t(size)) s.push_back(i);
  return s;
}

void for_each_share(Group& g, std::size_t n, const std::function<void(const std::vector<std::size_t>&, const Emit&)>& work,
                    const std::function<void(std::size_t, int, std::string)>& take) {
  const auto share = share_of(n, g.rank(), g.size());
  if (g.size() == 1) {
    work(share, [&](std::size_t u, std::string b) { take(u, 0, std::move(b)); });
    return;
  }
  // The work runs on its own thread; this (the main) thread is the only one that calls the group (MPI
  // initialised with MPI_THREAD_FUNNELED), forwarding results as they come.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<std::size_t, std::string>> results;
  bool finished = false;
  std::exception_ptr error;
  const Emit emit = [&](std::size_t u, std::string b) {
    {
      std::lock_guard<std::mutex> lock(mu);
      results.emplace_back(u, std::move(b));
    }
    cv.notify_one();
  };
  std::thread worker([&] {
    try {
      work(share, emit);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      finished = true;
    }
    cv.notify_one();
  });
  // The next local result, waiting at most `wait` (the root: a few ms, then it polls the other ranks); nullopt
  // when none came, at once when the work has returned at the other ranks (they have nothing left to wait for).
  auto next = [&](std::chrono::milliseconds wait) -> std::optional<std::pair<std::size_t, std::string>> {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, wait, [&] { return !results.empty() || (finished && !g.root()); });
    if (results.empty()) return std::nullopt;
    auto r = std::move(results.front());
    results.pop_front();
    return r;
  };
  auto all_taken = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return finished && results.empty();
  };
  try {
    int done = 0;  // root: ranks whose work has returned
    for (;;) {
      if (auto r = next(std::chrono::milliseconds(g.root() ? 2 : 1000))) {
        if (g.root())
          take(r->first, 0, std::move(r->second));
        else
          g.send(0, ByteWriter().u64(kResult).u64(r->first).str(r->second).take());
        continue;
      }
      if (!g.root()) {
        if (all_taken()) break;
        continue;
      }
      while (auto m = g.poll()) {
        ByteReader in(m->second);
        const std::uint64_t kind = in.u64();
        if (kind == kDone) {
          in.end();
          ++done;
          continue;
        }
        if (kind != kResult) throw std::runtime_error(fmt::format("parallel: unknown message kind {} from rank {}", kind, m->first));
        const std::size_t u = in.u64();
        std::string bytes = in.str();
        in.end();
        if (u >= n) throw std::runtime_error(fmt::format("parallel: rank {} sent unit {} of {}", m->first, u, n));
        take(u, m->first, std::move(bytes));
      }
      if (all_taken() && (done == g.size() - 1 || error)) break;  // an error here: rethrown below at once
    }
  } catch (const std::exception& e) {
    // The work thread may still run and the other ranks wait for this one: end the job (results taken so
    // far are written).
    std::fprintf(stderr, "vla: failed: rank %d: %s\n", g.rank(), e.what());
    g.abort(1);
  }
  worker.join();
  if (error) std::rethrow_exception(error);
  if (!g.root()) g.send(0, ByteWriter().u64(kDone).take());
}

std::vector<std::string> gather_units(Group& g, std::size_t n, const std::function<std::string(std::size_t)>& f,
                                      const Cost& cost) {
  std::vector<std::size_t> unit(n);  // the deal's k-th place holds unit[k]
  std::iota(unit.begin(), unit.end(), std::size_t(0));
  if (cost) {
    std::vector<double> c(n);
    for (std::size_t i = 0; i < n; ++i) c[i] = cost(i);
    std::stable_sort(unit.begin(), unit.end(), [&](std::size_t a, std::size_t b) { return c[a] > c[b]; });
  }
  std::vector<std::string> out(g.root() ? n : 0);
  for_each_share(
      g, n,
      [&](const std::vector<std::size_t>& share, const Emit& emit) {
        for (std::size_t k : share) emit(k, f(unit[k]));
      },
      [&](std::size_t k, int, std::string b) { out[unit[k]] = std::move(b); });
  return out;
}

}  // namespace vla::parallel
