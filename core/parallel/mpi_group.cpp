#include "core/parallel/mpi_group.hpp"

// The C API only: Open MPI's and MPICH's deprecated C++ bindings stay out.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <fmt/format.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <thread>

namespace vla::parallel {

namespace {

void ok(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw std::runtime_error(fmt::format("MPI: {} failed: {}", what, std::string(msg, std::size_t(len))));
}

int byte_count(std::size_t n) {
  if (n > std::size_t(INT_MAX)) throw std::runtime_error(fmt::format("MPI: a message of {} bytes (at most {} are sent at once)", n, INT_MAX));
  return int(n);
}

constexpr int kTag = 7;  // the tag of every point-to-point message (one protocol at a time)

class MpiGroup final : public Group {
 public:
  MpiGroup(int& argc, char**& argv) {
    int provided = 0;
    ok(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);  // every call's error becomes an exception naming it
    if (provided < MPI_THREAD_FUNNELED) throw std::runtime_error("MPI: this MPI library gives no MPI_THREAD_FUNNELED support");
    ok(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    ok(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
    MPI_Comm host;
    ok(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &host), "MPI_Comm_split_type");
    ok(MPI_Comm_rank(host, &local_rank_), "MPI_Comm_rank (host)");
    ok(MPI_Comm_size(host, &local_size_), "MPI_Comm_size (host)");
    MPI_Comm_free(&host);
  }
  ~MpiGroup() override { MPI_Finalize(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }

  void send(int to, const std::string& bytes) override {
    ok(MPI_Send(bytes.data(), byte_count(bytes.size()), MPI_BYTE, to, kTag, MPI_COMM_WORLD), "MPI_Send");
  }

  std::optional<std::pair<int, std::string>> poll() override {
    int flag = 0;
    MPI_Status st;
    ok(MPI_Iprobe(MPI_ANY_SOURCE, kTag, MPI_COMM_WORLD, &flag, &st), "MPI_Iprobe");
    if (!flag) return std::nullopt;
    int n = 0;
    ok(MPI_Get_count(&st, MPI_BYTE, &n), "MPI_Get_count");
    std::string b(std::size_t(n), '\0');
    ok(MPI_Recv(b.data(), n, MPI_BYTE, st.MPI_SOURCE, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
    return std::make_pair(int(st.MPI_SOURCE), std::move(b));
  }

  std::string broadcast(const std::string& bytes) override {
    // The length by a non-blocking broadcast tested with sleeps (a blocking one spins a core while the
    // root works), then the bytes, which the root sends straight after.
    std::uint64_t n = rank_ == 0 ? bytes.size() : 0;
    byte_count(n);
    MPI_Request req;
    ok(MPI_Ibcast(&n, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD, &req), "MPI_Ibcast");
    for (int done = 0;;) {
      ok(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::string b = rank_ == 0 ? bytes : std::string(n, '\0');
    ok(MPI_Bcast(b.data(), byte_count(n), MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast");
    return b;
  }

  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 private:
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
};

}  // namespace

std::unique_ptr<Group> make_mpi_group(int& argc, char**& argv) { return std::make_unique<MpiGroup>(argc, argv); }

}  // namespace vla::parallel
