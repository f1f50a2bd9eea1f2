// The training loop (trainer.hpp), for every device.
#include "core/train/trainer.hpp"

#include "core/io/atomic_file.hpp"
#include "core/io/csv.hpp"
#include "core/io/provenance.hpp"
#include "core/train/checkpoint.hpp"

#include <chrono>
#include <cmath>
#include <mutex>

namespace vla::train {

namespace {

std::uint64_t eval_seed(std::uint64_t seed) { return seed ^ 0xE7A1E7A1D00DFEEDULL; }  // held out: not a training seed

double evaluate(const TrainConfig& c, StepEngine& e) {
  double correct = 0, total = 0;
  for (int i = 0; i < c.eval_batches; ++i) {
    const Batch b = make_batch(c.task, c.eval_batch, batch_seed(eval_seed(c.seed), i), c.ood);
    int n = 0;
    for (const auto& tg : b.targets) for (int x : tg) n += x >= 0;
    const auto r = e.forward(b, false);
    correct += r.accuracy * n;
    total += n;
  }
  return correct / total;
}

std::vector<std::string> log_header(const TrainConfig& c) {
  std::vector<std::string> h{"step", "loss", "train_accuracy", "lr", "grad_norm", "eval_accuracy"};
  for (int l = 0; l < c.model.layers; ++l) { h.push_back(fmt::format("S_fro_{}", l)); h.push_back(fmt::format("A_fro_{}", l)); }
  return h;
}

void write_log(const std::filesystem::path& dir, const Checkpoint& c) {
  io::CsvTable t(log_header(c.cfg));
  for (const auto& r : c.log) t.add_row(r);
  t.write(dir / "log.csv");
}

// The loop, for every device. Each step: batch s = make_batch(seed, s), the engine's loss and gradient,
// global-norm clip, lr(s), the engine's AdamW update, evaluation when due, a log row, a checkpoint every
// checkpoint_every steps (atomic: a stop at any point leaves the last complete checkpoint and its log).
TrainResult run(Checkpoint ck, StepEngine& e, const std::filesystem::path& dir, const RunOptions& ro) {
  const TrainConfig& c = ck.cfg;
  const auto t0 = std::chrono::steady_clock::now();
  const double wall0 = ck.wall_s;
  auto elapsed = [&] { return wall0 + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  TrainResult res;
  double eval_acc = std::nan("");
  double last_loss = ck.log.empty() ? std::nan("") : ck.log.back()[1];
  const int start = ck.step;
  const int progress_every = ro.progress_every > 0 ? ro.progress_every : std::max(1, c.steps / 10);
  const bool write = !dir.empty();
  auto checkpoint = [&] {
    ck.wall_s = elapsed();
    if (!write) return;
    e.export_state(ck.p, ck.opt);
    write_checkpoint(dir / "checkpoint.bin", ck);
    write_log(dir, ck);
  };
  double step_ms = 0;
  while (ck.step < c.steps) {
    if ((ro.interrupt && ro.interrupt->load()) || (ro.stop_after >= 0 && ck.step >= ro.stop_after)) {
      res.interrupted = true;
      break;
    }
    const int s = ck.step;
    const auto ts = std::chrono::steady_clock::now();
    const Batch b = make_batch(c.task, c.batch, batch_seed(c.seed, std::uint64_t(s)));
    const BatchResult br = e.forward(b, true);
    if (!std::isfinite(br.loss) || !br.nonfinite.empty())
      throw std::runtime_error(fmt::format("step {}: non-finite loss ({}); first non-finite tensor: {}; the last good checkpoint "
                                           "(step {}) is kept in '{}'", s + 1, br.loss, br.nonfinite.empty() ? "loss" : br.nonfinite,
                                           start == s ? start : (s / c.checkpoint_every) * c.checkpoint_every, dir.string()));
    std::string bad;
    const double gnorm = e.grad_norm(&bad);
    if (!bad.empty() || !std::isfinite(gnorm))
      throw std::runtime_error(fmt::format("step {}: non-finite gradient in tensor {}", s + 1, bad.empty() ? "gradient" : bad));
    const double lr = learning_rate(c.opt, s, c.steps);
    e.apply(c.opt, lr, gnorm > c.opt.clip ? c.opt.clip / gnorm : 1.0);
    step_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - ts).count();
    ck.step = s + 1;
    last_loss = br.loss;
    const bool do_eval = ck.step == c.steps || (c.eval_every > 0 && ck.step % c.eval_every == 0);
    eval_acc = do_eval ? evaluate(c, e) : std::nan("");
    std::vector<double> row{double(ck.step), br.loss, br.accuracy, lr, gnorm, eval_acc};
    for (int l = 0; l < c.model.layers; ++l) { row.push_back(br.S_fro[l]); row.push_back(br.A_fro[l]); }
    ck.log.push_back(row);
    if (ro.progress && ((ck.step - start) % progress_every == 0 || ck.step == c.steps)) {
      const double el = elapsed() - wall0, per = el / (ck.step - start);
      ro.progress(fmt::format("step {}/{}  loss {:.4f}  acc {:.3f}{}  {}  ETA {:.0f} s", ck.step, c.steps, br.loss,
                              br.accuracy, std::isnan(eval_acc) ? "" : fmt::format("  eval {:.3f}", eval_acc),
                              per >= 0.1 ? fmt::format("{:.2f} s/step", per) : fmt::format("{:.2f} ms/step", 1e3 * per),
                              per * (c.steps - ck.step)));
    }
    if (ck.step % c.checkpoint_every == 0 || ck.step == c.steps) checkpoint();
  }
  checkpoint();
  res.steps_done = ck.step;
  res.steps_run = ck.step - start;
  res.final_loss = last_loss;
  res.wall_s = ck.wall_s;
  res.step_ms = ck.step > start ? step_ms / (ck.step - start) : 0.0;
  for (const auto& r : ck.log) res.losses.push_back(r[1]);
  for (auto it = ck.log.rbegin(); it != ck.log.rend(); ++it)
    if (!std::isnan((*it)[5])) { res.eval_accuracy = (*it)[5]; break; }
  res.log = ck.log;
  e.export_state(res.params, ck.opt);
  if (!write) return res;
  nlohmann::json js{{"config", c.to_json()}, {"device", ck.device}, {"steps_done", ck.step}, {"complete", ck.step == c.steps},
                    {"final_eval_accuracy", res.eval_accuracy}, {"final_loss", res.final_loss}, {"wall_time_s", res.wall_s},
                    {"step_ms", res.step_ms},
                    {"metric", "exact match per query position (fraction of target tokens predicted by argmax)"},
                    {"provenance", io::provenance(ck.device)}};
  io::write_text_atomically(dir / "summary.json", js.dump(2) + "\n");
  return res;
}

std::unique_ptr<StepEngine> make_engine(const Device& device, const TrainConfig& cfg, const RunOptions& ro) {
  if (!device.make) throw std::invalid_argument(fmt::format("--device: '{}' has no training engine", device.name));
  return device.make(cfg, ro);
}

// A run continues only on the device it was trained on: the devices sum in different orders, so the
// continued run would not be the run the checkpoint came from.
void require_same_device(const std::filesystem::path& dir, const std::string& trained_on, const Device& device) {
  if (trained_on != device.name)
    throw std::invalid_argument(fmt::format("--device: the run in '{}' was trained on {}; resume it with --device {} (the devices "
                                            "round differently, so continuing on {} would not reproduce the run)",
                                            dir.string(), trained_on, trained_on, device.name));
}

void check_config(const TrainConfig& cfg, const Device& device) {
  cfg.validate();
  if (device.check) device.check(cfg);
}

// Runs one(i, run options, device) for i < dirs.size() through device.run_many; run i's progress
// lines are prefixed with its folder's name.
std::vector<TrainResult> run_many(const std::vector<std::filesystem::path>& dirs, const RunOptions& ro, const Device& device,
                                  const std::function<TrainResult(std::size_t, const RunOptions&, const Device&)>& one) {
  std::vector<TrainResult> res(dirs.size());
  std::mutex mu;  // one progress line at a time (the GPU's runs are concurrent)
  const Device::Job job = [&](std::size_t i, const Device& on) {
    RunOptions r = ro;
    if (ro.progress) {
      const std::string name = dirs[i].empty() ? fmt::format("run {}", i) : dirs[i].filename().string();
      r.progress = [&, name](const std::string& line) {
        std::lock_guard<std::mutex> lock(mu);
        ro.progress(name + ": " + line);
      };
    }
    res[i] = one(i, r, on);
  };
  if (device.run_many) {
    device.run_many(dirs.size(), job);
  } else {
    for (std::size_t i = 0; i < dirs.size(); ++i) job(i, device);
  }
  return res;
}

}  // namespace

TrainResult train(const TrainConfig& cfg, const std::filesystem::path& out_dir, const RunOptions& ro, const Device& device) {
  cfg.validate();  // every bad config is rejected here, before any work
  const auto engine = make_engine(device, cfg, ro);  // and every device-specific one
  Checkpoint ck;
  ck.cfg = cfg;
  ck.device = device.name;
  if (!out_dir.empty()) std::filesystem::create_directories(out_dir);
  return run(std::move(ck), *engine, out_dir, ro);
}

std::string checkpoint_device(const std::filesystem::path& out_dir) {
  return read_checkpoint_header(out_dir / "checkpoint.bin").device;
}

TrainResult resume(const std::filesystem::path& out_dir, const RunOptions& ro, const Device& device) {
  if (out_dir.empty()) throw std::invalid_argument("--resume: an output folder is required");
  Checkpoint ck = read_checkpoint(out_dir / "checkpoint.bin");
  require_same_device(out_dir, ck.device, device);
  ck.cfg.validate();
  const auto engine = make_engine(device, ck.cfg, ro);
  engine->import_state(ck.p, ck.opt);
  return run(std::move(ck), *engine, out_dir, ro);
}

std::vector<TrainResult> train_many(const std::vector<TrainConfig>& cfgs, const std::vector<std::filesystem::path>& dirs,
                                    const RunOptions& ro, const Device& device) {
  if (dirs.size() != cfgs.size()) throw std::invalid_argument("train_many: one output folder per run");
  for (const auto& c : cfgs) check_config(c, device);  // every bad config rejected before any run starts
  return run_many(dirs, ro, device, [&](std::size_t i, const RunOptions& r, const Device& on) {
    return train(cfgs[i], dirs[i], r, on);
  });
}

std::vector<TrainResult> resume_many(const std::vector<std::filesystem::path>& dirs, const RunOptions& ro,
                                     const Device& device) {
  for (const auto& d : dirs) {  // a missing checkpoint, another device's run or a bad config: before any run continues
    if (d.empty()) throw std::invalid_argument("--resume: an output folder is required");
    const Checkpoint head = read_checkpoint_header(d / "checkpoint.bin");
    require_same_device(d, head.device, device);
    check_config(head.cfg, device);
  }
  return run_many(dirs, ro, device, [&](std::size_t i, const RunOptions& r, const Device& on) {
    return resume(dirs[i], r, on);
  });
}

}  // namespace vla::train
