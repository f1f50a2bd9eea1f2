#include "core/train/trainer.hpp"

#include "core/io/atomic_file.hpp"
#include "core/io/csv.hpp"
#include "core/io/provenance.hpp"

#include <chrono>
#include <cmath>
#include <fstream>
#include <thread>

namespace vla::train {

using model::Params;

void TrainConfig::validate() const {
  task.validate();
  if (steps < 1) throw std::invalid_argument(fmt::format("--steps: must be >= 1, got {}", steps));
  if (batch < 1) throw std::invalid_argument(fmt::format("--batch: must be >= 1, got {}", batch));
  if (eval_every < 0) throw std::invalid_argument(fmt::format("--eval-every: must be >= 0 (0 = at the end), got {}", eval_every));
  if (eval_batches < 1 || eval_batch < 1) throw std::invalid_argument("--eval-batches: must be >= 1");
  if (checkpoint_every < 1) throw std::invalid_argument(fmt::format("--checkpoint-every: must be >= 1, got {}", checkpoint_every));
  if (model.vocab != kVocab)
    throw std::invalid_argument(fmt::format("--vocab: the tasks use a vocabulary of {}, got {}", kVocab, model.vocab));
  if (task.length() > model.max_len)
    throw std::invalid_argument(fmt::format("--seq-len: T = {} exceeds the positional embedding ({} rows)", task.length(), model.max_len));
  if (ood && task.task != "mqar") throw std::invalid_argument("--ood: only MQAR has an out-of-distribution mode");
  model.validate();
}

nlohmann::json TrainConfig::to_json() const {
  const auto& m = model;
  return {{"task", task.task}, {"pairs", task.pairs}, {"seq_len", task.length()}, {"mixer", m.mixer.mixer},
          {"vocab", m.vocab}, {"d_model", m.d_model}, {"heads", m.heads}, {"d_head", m.d_head}, {"ffn", m.ffn},
          {"layers", m.layers}, {"max_len", m.max_len}, {"lambda0", m.mixer.penalty.lambda0}, {"eps", m.mixer.penalty.eps},
          {"refresh_period", m.mixer.penalty.refresh_period}, {"refresh_eta", m.mixer.penalty.refresh_eta},
          {"steps", steps}, {"batch", batch}, {"seed", seed}, {"eval_every", eval_every}, {"eval_batches", eval_batches},
          {"eval_batch", eval_batch}, {"ood", ood}, {"checkpoint_every", checkpoint_every}, {"lr", opt.lr},
          {"beta1", opt.beta1}, {"beta2", opt.beta2}, {"adam_eps", opt.eps}, {"weight_decay", opt.weight_decay},
          {"warmup_frac", opt.warmup_frac}, {"clip", opt.clip}};
}

TrainConfig TrainConfig::from_json(const nlohmann::json& j) {
  TrainConfig c;
  c.task.task = j.at("task"); c.task.pairs = j.at("pairs");
  c.task.seq_len = c.task.task == "copy" ? int(j.at("seq_len")) : 0;
  c.model.mixer.mixer = j.at("mixer"); c.model.vocab = j.at("vocab"); c.model.d_model = j.at("d_model");
  c.model.heads = j.at("heads"); c.model.d_head = j.at("d_head"); c.model.ffn = j.at("ffn"); c.model.layers = j.at("layers");
  c.model.max_len = j.at("max_len"); c.model.mixer.penalty.lambda0 = j.at("lambda0"); c.model.mixer.penalty.eps = j.at("eps");
  c.model.mixer.penalty.refresh_period = j.at("refresh_period"); c.model.mixer.penalty.refresh_eta = j.at("refresh_eta");
  c.steps = j.at("steps"); c.batch = j.at("batch"); c.seed = j.at("seed"); c.eval_every = j.at("eval_every");
  c.eval_batches = j.at("eval_batches"); c.eval_batch = j.at("eval_batch"); c.ood = j.at("ood");
  c.checkpoint_every = j.at("checkpoint_every"); c.opt.lr = j.at("lr"); c.opt.beta1 = j.at("beta1"); c.opt.beta2 = j.at("beta2");
  c.opt.eps = j.at("adam_eps"); c.opt.weight_decay = j.at("weight_decay"); c.opt.warmup_frac = j.at("warmup_frac");
  c.opt.clip = j.at("clip");
  return c;
}

BatchResult batch_gradient(const model::ModelConfig& cfg, const Params<float>& p, const Batch& b, Params<float>* grad,
                           int threads) {
  const int B = static_cast<int>(b.tokens.size());
  int total_targets = 0;
  for (const auto& tg : b.targets)
    for (int x : tg) total_targets += x >= 0;
  const double scale = 1.0 / std::max(1, total_targets);
  struct Shard {
    Params<float> g;
    double loss = 0;
    int correct = 0;
    std::vector<double> S, A;
    std::string nonfinite;
  };
  std::vector<Shard> shards(kShards);
  auto run_shard = [&](int i) {
    Shard& sh = shards[i];
    if (grad) sh.g = p.zeros_like();
    sh.S.assign(cfg.layers, 0.0);
    sh.A.assign(cfg.layers, 0.0);
    for (int s = i * B / kShards; s < (i + 1) * B / kShards; ++s) {
      const auto r = model::sequence_forward_backward<float>(cfg, p, b.tokens[s], b.targets[s], scale, grad ? &sh.g : nullptr);
      sh.loss += r.loss_sum;
      sh.correct += r.correct;
      for (int l = 0; l < cfg.layers; ++l) { sh.S[l] += r.S_fro[l]; sh.A[l] += r.A_fro[l]; }
      if (sh.nonfinite.empty() && !r.nonfinite.empty()) sh.nonfinite = fmt::format("sequence {}: {}", s, r.nonfinite);
    }
  };
  const int nt = std::max(1, std::min(kShards, threads > 0 ? threads : int(std::thread::hardware_concurrency())));
  std::atomic<int> next{0};
  std::vector<std::thread> pool;
  std::exception_ptr err;
  std::mutex err_mu;
  auto worker = [&] {
    for (int i = next++; i < kShards; i = next++) {
      try { run_shard(i); } catch (...) { std::lock_guard<std::mutex> lk(err_mu); if (!err) err = std::current_exception(); }
    }
  };
  for (int t = 1; t < nt; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (err) std::rethrow_exception(err);
  BatchResult r;
  r.S_fro.assign(cfg.layers, 0.0);
  r.A_fro.assign(cfg.layers, 0.0);
  int correct = 0;
  for (int i = 0; i < kShards; ++i) {  // fixed reduction order
    r.loss += shards[i].loss;
    correct += shards[i].correct;
    for (int l = 0; l < cfg.layers; ++l) { r.S_fro[l] += shards[i].S[l]; r.A_fro[l] += shards[i].A[l]; }
    if (r.nonfinite.empty()) r.nonfinite = shards[i].nonfinite;
    if (grad) {
      if (i == 0) *grad = std::move(shards[0].g);
      else for (std::size_t k = 0; k < grad->t.size(); ++k) grad->t[k] += shards[i].g.t[k];
    }
  }
  r.loss *= scale;
  r.accuracy = double(correct) / std::max(1, total_targets);
  for (int l = 0; l < cfg.layers; ++l) { r.S_fro[l] /= B; r.A_fro[l] /= B; }
  return r;
}

namespace {

std::uint64_t eval_seed(std::uint64_t seed) { return seed ^ 0xE7A1E7A1D00DFEEDULL; }  // held out: not a training seed

// The CPU engine: batch_gradient over kShards fixed shards and adamw_update, exactly as the loop did
// before it drove engines (the CPU log and checkpoint are unchanged by the abstraction, bit for bit).
class CpuEngine final : public StepEngine {
 public:
  CpuEngine(const TrainConfig& c, int threads)
      : cfg_(c.model), threads_(threads), p_(model::init_params<float>(c.model, c.seed)) {
    opt_.m = p_.zeros_like();
    opt_.v = p_.zeros_like();
  }
  BatchResult forward(const Batch& b, bool gradient) override {
    return batch_gradient(cfg_, p_, b, gradient ? &g_ : nullptr, threads_);
  }
  double grad_norm(std::string* nonfinite_tensor) override {
    double sq = 0;
    for (std::size_t i = 0; i < g_.t.size(); ++i) {
      const double n2 = g_.t[i].template cast<double>().squaredNorm();
      if (!std::isfinite(n2)) { *nonfinite_tensor = g_.names[i]; return n2; }
      sq += n2;
    }
    return std::sqrt(sq);
  }
  void apply(const AdamWConfig& c, double lr, double clip_scale) override {
    if (clip_scale != 1.0)
      for (auto& m : g_.t) m *= float(clip_scale);
    adamw_update(c, lr, p_, g_, opt_);
  }
  void export_state(Params<float>& p, AdamWState<float>& opt) const override { p = p_; opt = opt_; }
  void import_state(const Params<float>& p, const AdamWState<float>& opt) override { p_ = p; opt_ = opt; }

 private:
  model::ModelConfig cfg_;
  int threads_;
  Params<float> p_, g_;
  AdamWState<float> opt_;
};

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

// Checkpoint: a binary file written atomically; magic, config JSON, step, wall time, the log rows,
// then parameters and the two Adam moments as (rows, cols, float data) per tensor. The device is a key
// "device" of the config JSON, written only when it is not "cpu": a CPU checkpoint keeps the key-less
// format, and any checkpoint without the key loads as "cpu".
struct Checkpoint {
  TrainConfig cfg;
  std::string device = "cpu";
  int step = 0;
  double wall_s = 0;
  std::vector<std::vector<double>> log;
  Params<float> p;
  AdamWState<float> opt;
};
constexpr char kMagic[8] = {'V', 'L', 'A', 'C', 'K', 'P', 'T', '1'};

template <class X> void put(std::ostream& o, const X& x) { o.write(reinterpret_cast<const char*>(&x), sizeof x); }
template <class X> X get(std::istream& i) { X x{}; i.read(reinterpret_cast<char*>(&x), sizeof x); if (!i) throw std::runtime_error("checkpoint: truncated file"); return x; }

void save(const std::filesystem::path& path, const Checkpoint& c) {
  io::write_atomically(path, [&](std::ostream& o) {
    o.write(kMagic, 8);
    nlohmann::json j = c.cfg.to_json();
    if (c.device != "cpu") j["device"] = c.device;
    const std::string js = j.dump();
    put<std::uint64_t>(o, js.size());
    o.write(js.data(), std::streamsize(js.size()));
    put<std::int64_t>(o, c.step);
    put<double>(o, c.wall_s);
    put<std::int64_t>(o, c.opt.step);
    put<std::uint64_t>(o, c.log.size());
    put<std::uint64_t>(o, c.log.empty() ? 0 : c.log[0].size());
    for (const auto& r : c.log) o.write(reinterpret_cast<const char*>(r.data()), std::streamsize(r.size() * sizeof(double)));
    for (const auto* P : {&c.p, &c.opt.m, &c.opt.v})
      for (const auto& m : P->t) {
        put<std::int64_t>(o, m.rows());
        put<std::int64_t>(o, m.cols());
        o.write(reinterpret_cast<const char*>(m.data()), std::streamsize(m.size() * sizeof(float)));
      }
  }, std::ios::out | std::ios::binary);
}

// Reads the header (magic, config, device) and leaves `in` at the step count.
Checkpoint load_header(std::ifstream& in, const std::filesystem::path& path) {
  if (!in) throw std::invalid_argument(fmt::format("--resume: no checkpoint at '{}'", path.string()));
  char magic[8];
  in.read(magic, 8);
  if (!in || std::string(magic, 8) != std::string(kMagic, 8))
    throw std::invalid_argument(fmt::format("--resume: '{}' is not a VLA training checkpoint", path.string()));
  Checkpoint c;
  std::string js(get<std::uint64_t>(in), '\0');
  in.read(js.data(), std::streamsize(js.size()));
  const auto j = nlohmann::json::parse(js);
  c.cfg = TrainConfig::from_json(j);
  c.device = j.value("device", std::string("cpu"));
  return c;
}

Checkpoint load(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  Checkpoint c = load_header(in, path);
  c.step = int(get<std::int64_t>(in));
  c.wall_s = get<double>(in);
  c.opt.step = get<std::int64_t>(in);
  const auto rows = get<std::uint64_t>(in), cols = get<std::uint64_t>(in);
  c.log.assign(rows, std::vector<double>(cols));
  for (auto& r : c.log) in.read(reinterpret_cast<char*>(r.data()), std::streamsize(cols * sizeof(double)));
  c.p = model::init_params<float>(c.cfg.model, c.cfg.seed);
  c.opt.m = c.p.zeros_like();
  c.opt.v = c.p.zeros_like();
  for (auto* P : {&c.p, &c.opt.m, &c.opt.v})
    for (auto& m : P->t) {
      const auto r = get<std::int64_t>(in), cc = get<std::int64_t>(in);
      if (r != m.rows() || cc != m.cols()) throw std::runtime_error("checkpoint: tensor shape does not match its config");
      in.read(reinterpret_cast<char*>(m.data()), std::streamsize(m.size() * sizeof(float)));
      if (!in) throw std::runtime_error("checkpoint: truncated file");
    }
  return c;
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
    save(dir / "checkpoint.bin", ck);
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

}  // namespace

Device cpu_device() {
  return {"cpu", [](const TrainConfig& c, const RunOptions& ro) -> std::unique_ptr<StepEngine> {
            return std::make_unique<CpuEngine>(c, ro.threads);
          }};
}

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
  const auto path = out_dir / "checkpoint.bin";
  std::ifstream in(path, std::ios::binary);
  return load_header(in, path).device;
}

TrainResult resume(const std::filesystem::path& out_dir, const RunOptions& ro, const Device& device) {
  if (out_dir.empty()) throw std::invalid_argument("--resume: an output folder is required");
  Checkpoint ck = load(out_dir / "checkpoint.bin");
  if (ck.device != device.name)
    throw std::invalid_argument(fmt::format("--device: the run in '{}' was trained on {}; resume it with --device {} (the devices "
                                            "round differently, so continuing on {} would not reproduce the run)",
                                            out_dir.string(), ck.device, ck.device, device.name));
  ck.cfg.validate();
  const auto engine = make_engine(device, ck.cfg, ro);
  engine->import_state(ck.p, ck.opt);
  return run(std::move(ck), *engine, out_dir, ro);
}

}  // namespace vla::train
