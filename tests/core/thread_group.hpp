#pragma once
// A parallel::Group whose ranks are threads of the test process (no MPI), so that the splitting code
// (core/parallel/group.hpp, studies/sweep_ranks.hpp) is tested in every build, under the sanitizers
// too. One ThreadWorld holds the mailboxes; each rank's thread uses its own ThreadGroup.
#include "core/parallel/group.hpp"

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace vla::test {

struct ThreadWorld {
  explicit ThreadWorld(int n) : size(n), inbox(std::size_t(n)) {}
  int size;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::deque<std::pair<int, std::string>>> inbox;  // per rank: (from, bytes)
  std::vector<std::string> broadcasts;                         // every broadcast, in order
};

class ThreadGroup final : public parallel::Group {
 public:
  ThreadGroup(ThreadWorld& w, int rank) : w_(w), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return w_.size; }
  int local_rank() const override { return rank_; }
  int local_size() const override { return w_.size; }
  void send(int to, const std::string& bytes) override {
    {
      std::lock_guard<std::mutex> lock(w_.mu);
      w_.inbox.at(std::size_t(to)).emplace_back(rank_, bytes);
    }
    w_.cv.notify_all();
  }
  std::optional<std::pair<int, std::string>> poll() override {
    std::lock_guard<std::mutex> lock(w_.mu);
    auto& box = w_.inbox[std::size_t(rank_)];
    if (box.empty()) return std::nullopt;
    auto m = std::move(box.front());
    box.pop_front();
    return m;
  }
  std::string broadcast(const std::string& bytes) override {
    std::unique_lock<std::mutex> lock(w_.mu);
    if (rank_ == 0) {
      w_.broadcasts.push_back(bytes);
      w_.cv.notify_all();
    } else {
      w_.cv.wait(lock, [&] { return w_.broadcasts.size() > seen_; });
    }
    return w_.broadcasts[seen_++];
  }
  [[noreturn]] void abort(int code) override { throw std::runtime_error("rank " + std::to_string(rank_) + " aborted with " + std::to_string(code)); }

 private:
  ThreadWorld& w_;
  int rank_;
  std::size_t seen_ = 0;
};

// Runs body(group) on `size` threads, one rank each, and rethrows the first exception once all have ended.
inline void run_ranks(int size, const std::function<void(parallel::Group&)>& body) {
  ThreadWorld w(size);
  std::vector<std::exception_ptr> err(static_cast<std::size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      ThreadGroup g(w, r);
      try {
        body(g);
      } catch (...) {
        err[std::size_t(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : err)
    if (e) std::rethrow_exception(e);
}

}  // namespace vla::test
