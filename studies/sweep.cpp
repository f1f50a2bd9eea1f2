#include "studies/sweep.hpp"

#include "core/io/atomic_file.hpp"
#include "core/model/params.hpp"
#include "core/train/tasks.hpp"
#include "studies/outputs.hpp"
#include "studies/sweep_ranks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace vla::studies {

namespace fs = std::filesystem;

namespace {

double json_number(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() || !it->is_number() ? kNaN : it->get<double>();  // nlohmann writes NaN as null
}

std::string format_seconds(double s) {
  if (!std::isfinite(s)) return "?";
  const long t = std::lround(s);
  return t >= 3600 ? fmt::format("{}h{:02}m", t / 3600, t % 3600 / 60) : t >= 60 ? fmt::format("{}m{:02}s", t / 60, t % 60)
                                                                                  : fmt::format("{}s", t);
}

bool is_divergence(const std::string& what) { return what.find("non-finite") != std::string::npos; }

// The trainer's message starts "step K: non-finite ...".
int divergence_step(const std::string& what) {
  int k = 0;
  return std::sscanf(what.c_str(), "step %d", &k) == 1 ? k : 0;
}

}  // namespace

std::vector<double> RunOutcome::column(const std::string& name) const {
  const auto t = read_csv(dir / "log.csv");
  return t.column(name);
}

double run_cost(const train::TrainConfig& c) {
  const double width = std::max(1.0, 0.5 + 0.5 * std::pow(c.model.d_head / 32.0, 2));  // the recurrences grow as d_h^2
  return double(c.steps) * c.batch * c.task.length() * width;
}

double estimated_seconds(const train::TrainConfig& c, const std::string& device, int cpu_threads) {
  const double T = c.task.length(), batch = c.batch / 64.0, cpu_width = run_cost(c) / (double(c.steps) * c.batch * T);
  const double gpu_width = std::max(1.0, c.model.d_head / 32.0);  // the fused kernels and the GEMMs: ~linear in d_h
  // GPU: ms per run-step of 16 runs at once mixing the four mixers, whole walls (set-up included), least
  // squares over T = 25, 49, 73, 97 and 256 on one H100 (studies/plan-rates.sh: 0.283, 0.438, 0.633, 0.828,
  // 2.095; the line reads within 3% of the last four and 8% under the first). An H200 measured 0-5% under it.
  const double step_ms = device == "cuda" ? (0.0636 + 0.00792 * T) * batch * gpu_width
                                          : 73e-3 * T * c.batch * cpu_width * 2.0 / std::max(1, cpu_threads);
  return 1.05 * c.steps * step_ms / 1e3;
}

double dense_flops(const train::TrainConfig& c) {
  return 6.0 * double(model::dense_macs_per_token(c.model)) * double(c.steps) * c.batch * c.task.length();
}

RunOutcome skipped_outcome(const train::TrainConfig& c, const SweepOptions& o) {
  RunOutcome out;
  out.cfg = c;
  out.status = RunOutcome::Status::Skipped;
  out.message = fmt::format("{} has no kernel for it and the CPU fallback is off", o.device.name);
  return out;
}

RunOutcome read_outcome(const train::TrainConfig& c, const fs::path& dir) {
  RunOutcome o;
  o.cfg = c;
  o.dir = dir;
  if (fs::exists(dir / "summary.json")) {
    const auto j = read_json(dir / "summary.json");
    o.device = j.value("device", "cpu");
    o.eval_accuracy = json_number(j, "final_eval_accuracy");
    o.final_loss = json_number(j, "final_loss");
    o.wall_s = json_number(j, "wall_time_s");
    o.step_ms = json_number(j, "step_ms");
    if (j.value("complete", false)) o.status = RunOutcome::Status::Complete;
  }
  if (fs::exists(dir / "diverged.json")) {
    const auto j = read_json(dir / "diverged.json");
    o.status = RunOutcome::Status::Diverged;
    o.diverged_step = j.value("step", 0);
    o.message = j.value("message", "");
    o.device = j.value("device", o.device);
    o.eval_accuracy = kNaN;
  }
  return o;
}

const train::Device* device_for(const train::TrainConfig& c, const SweepOptions& o) {
  if (!o.device.check || o.fallback.name == o.device.name) return &o.device;
  try {
    o.device.check(c);
    return &o.device;
  } catch (const std::invalid_argument&) {
    return o.use_fallback ? &o.fallback : nullptr;  // e.g. a head width or a mixer the GPU has no kernel for
  }
}

SweepResult sweep(const std::vector<train::TrainConfig>& runs, const RunStore& store, const SweepOptions& o) {
  if (o.ranks && o.ranks->size() > 1) return sweep_over_ranks(runs, store, o);
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  SweepResult res;

  struct Job {
    train::TrainConfig cfg;
    std::string key;
    fs::path dir;
    bool resume = false;
    double cost = 0, done = 0;  // done: the fraction of cost reported by the run's progress lines, times cost
  };
  struct Pool {
    const train::Device* device;
    std::vector<Job> jobs;
    std::size_t next = 0;
    int running = 0;
    double total = 0, done = 0;
  };
  Pool dev{&o.device, {}, 0, 0, 0, 0}, fb{&o.fallback, {}, 0, 0, 0, 0};

  for (const auto& c : runs) {
    const std::string key = RunStore::key(c);
    if (res.outcomes.count(key)) continue;
    const train::Device* d = device_for(c, o);
    if (!d) {
      res.outcomes[key] = skipped_outcome(c, o);
      ++res.skipped;
      continue;
    }
    Pool& p = d == &o.device ? dev : fb;
    const fs::path dir = o.train ? store.dir(c, p.device->name) : store.existing(c, p.device->name);
    RunOutcome out = read_outcome(c, dir);
    res.outcomes[key] = out;
    if (out.status != RunOutcome::Status::Interrupted) {
      ++res.reused;
      if (o.finished) o.finished(out, "reused");
      continue;
    }
    p.jobs.push_back({c, key, dir, fs::exists(dir / "checkpoint.bin"), run_cost(c), 0});
    p.total += p.jobs.back().cost;
  }
  for (Pool* p : {&dev, &fb})
    std::stable_sort(p->jobs.begin(), p->jobs.end(), [](const Job& a, const Job& b) { return a.cost > b.cost; });

  const std::size_t todo = dev.jobs.size() + fb.jobs.size();
  if (!o.train && todo) {
    const Job& first = dev.jobs.empty() ? fb.jobs.front() : dev.jobs.front();
    throw std::runtime_error(fmt::format("--from-store: {} of the {} runs are not finished in the store (one: {}); nothing is trained "
                                         "with --from-store",
                                         todo, res.outcomes.size(), first.dir.string()));
  }
  std::mutex mu;
  std::size_t finished = 0;
  double last_status = -1e300;
  std::exception_ptr error;
  auto say = [&](const std::string& line) {
    if (o.progress) o.progress(line);
  };
  auto status_line = [&] {  // under mu
    double eta = 0;
    for (const Pool* p : {&dev, &fb})
      if (p->total > p->done) eta = std::max(eta, p->done > 0 ? (p->total - p->done) * elapsed() / p->done : kNaN);
    std::string running;
    for (const Pool* p : {&dev, &fb})
      if (p->running) running += fmt::format(" {} running on {};", p->running, p->device->name);
    return fmt::format("sweep: {}/{} runs finished ({} already in the store, {} resumed, {} diverged);{} elapsed {}, ETA {}", finished,
                       todo, res.reused, res.resumed, res.diverged, running, format_seconds(elapsed()), format_seconds(eta));
  };
  say(fmt::format("sweep: {} distinct runs, {} already in the store, {} skipped, {} to train ({} to resume) on {}{}", res.outcomes.size(),
                  res.reused, res.skipped, todo, [&] {
                    int r = 0;
                    for (const Pool* p : {&dev, &fb})
                      for (const auto& j : p->jobs) r += j.resume;
                    return r;
                  }(),
                  o.device.name, fb.jobs.empty() ? "" : fmt::format(" ({} the device refuses: on {})", fb.jobs.size(), o.fallback.name)));

  auto stop_requested = [&] { return (o.interrupt && o.interrupt->load()) || error; };
  auto worker = [&](Pool& p) {
    for (;;) {
      Job* j;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (p.next >= p.jobs.size() || stop_requested()) return;
        j = &p.jobs[p.next++];
        ++p.running;
      }
      train::RunOptions ro;
      ro.threads = o.threads;
      ro.interrupt = o.interrupt;
      ro.progress_every = 0;  // every ~10% of the run's steps: "step k/N ..."
      ro.progress = [&, j](const std::string& line) {
        int k = 0, n = 0;
        if (std::sscanf(line.c_str(), "%*[^:]: step %d/%d", &k, &n) != 2 || n <= 0) return;
        std::lock_guard<std::mutex> lock(mu);
        const double d = j->cost * double(k) / n;
        p.done += d - j->done;
        j->done = d;
        if (elapsed() - last_status >= o.status_every_s) {
          last_status = elapsed();
          say(status_line());
        }
      };
      RunOutcome out;
      try {
        if (j->resume)
          train::resume_many({j->dir}, ro, *p.device);
        else
          train::train_many({j->cfg}, {j->dir}, ro, *p.device);
        out = read_outcome(j->cfg, j->dir);
      } catch (const std::runtime_error& e) {
        if (!is_divergence(e.what())) {
          std::lock_guard<std::mutex> lock(mu);
          if (!error) error = std::current_exception();
          --p.running;
          return;
        }
        nlohmann::json d{{"step", divergence_step(e.what())}, {"message", e.what()}, {"device", p.device->name},
                         {"config", j->cfg.to_json()}};
        io::write_text_atomically(j->dir / "diverged.json", d.dump(2) + "\n");
        out = read_outcome(j->cfg, j->dir);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
        --p.running;
        return;
      }
      std::lock_guard<std::mutex> lock(mu);
      --p.running;
      res.outcomes[j->key] = out;
      if (out.status == RunOutcome::Status::Interrupted) continue;
      p.done += j->cost - j->done;
      j->done = j->cost;
      ++finished;
      if (o.finished) o.finished(out, j->resume ? "resumed" : "trained");
      res.resumed += j->resume;
      res.trained += !j->resume;
      res.diverged += out.status == RunOutcome::Status::Diverged;
      say(fmt::format("  {} {} on {}: {}", j->resume ? "resumed" : "trained", j->dir.filename().string(), p.device->name,
                      out.status == RunOutcome::Status::Diverged
                          ? fmt::format("diverged at step {}", out.diverged_step)
                          : fmt::format("eval {:.4f}, loss {:.4f}, {:.1f} s", out.eval_accuracy, out.final_loss, out.wall_s)));
      last_status = elapsed();
      say(status_line());
    }
  };

  std::vector<std::thread> threads;
  const int k = dev.device->run_many ? std::max(1, o.concurrent) : 1;
  for (int i = 0; i < k && i < int(dev.jobs.size()); ++i) threads.emplace_back(worker, std::ref(dev));
  for (int i = 0; i < std::max(1, o.fallback_concurrent) && i < int(fb.jobs.size()); ++i) threads.emplace_back(worker, std::ref(fb));
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);

  res.wall_s = elapsed();
  for (const auto& [key, out] : res.outcomes) res.interrupted = res.interrupted || out.status == RunOutcome::Status::Interrupted;
  if (todo) say(fmt::format("sweep: {} in {}", res.interrupted ? "stopped (rerun the same command to continue)" : "done",
                            format_seconds(res.wall_s)));
  return res;
}

}  // namespace vla::studies
