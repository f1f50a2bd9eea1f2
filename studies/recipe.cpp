#include "studies/recipe.hpp"

#include "studies/outputs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <stdexcept>

namespace vla::studies::recipe {

namespace {

// The --quick shrink, applied to a full-size config (docs/studies.md).
void shrink(train::TrainConfig& c) {
  c.model.d_model /= 4;
  c.model.d_head = std::max(2, c.model.d_head / 4);
  c.model.ffn /= 4;
  const int full = c.steps;
  c.steps = std::clamp(full / 100, 10, 40);  // 1000..3000 -> 10..30, 10000 -> 40: distinct as in full size
  c.batch = c.task.task == "copy" ? 4 : 8;
  if (c.task.task == "copy") c.task.seq_len = 16;
  c.eval_batches = 1;
  c.eval_batch = 16;
  c.eval_every = std::max(1, c.steps / 5);
  c.checkpoint_every = std::max(1, c.steps / 2);
}

train::TrainConfig base(const std::string& mixer, std::uint64_t seed, int steps) {
  train::TrainConfig c;  // model and optimiser defaults are Tables 3 and 6 (core/model/config.hpp, core/train/adamw.hpp)
  c.model.mixer.mixer = mixer;
  c.seed = seed;
  c.steps = steps;
  c.eval_batches = 15;  // 15 x 64 = 960 samples (Table 6)
  c.eval_batch = 64;
  c.checkpoint_every = std::max(100, steps / 10);
  return c;
}

}  // namespace

train::TrainConfig mqar(const Mqar& r, const StudyOptions& o) {
  auto c = base(r.mixer, r.seed, r.steps);
  c.task.task = "mqar";
  c.task.pairs = r.pairs;
  c.task.seq_len = r.seq_len;
  c.batch = 64;
  c.opt.lr = r.lr;
  c.model.d_head = r.d_head;
  c.model.max_len = std::max(c.model.max_len, r.seq_len);
  c.ood = r.ood;
  c.eval_every = 100;
  if (o.quick) shrink(c);
  return c;
}

train::TrainConfig copy(const std::string& mixer, std::uint64_t seed, const StudyOptions& o) {
  auto c = base(mixer, seed, 1500);
  c.task.task = "copy";
  c.task.seq_len = 64;
  c.batch = 32;
  c.eval_every = 50;
  if (o.quick) shrink(c);
  return c;
}

std::vector<std::uint64_t> seeds(const StudyOptions& o, const std::vector<std::uint64_t>& full) {
  if (!o.seeds.empty()) return o.seeds;
  if (o.quick) return {full.begin(), full.begin() + std::min<std::size_t>(2, full.size())};
  return full;
}

std::string lr_label(double lr) {
  const int e = int(std::floor(std::log10(lr) + 1e-9));
  const double m = lr / std::pow(10.0, e);
  return std::abs(m - std::round(m)) < 1e-9 ? fmt::format("{}e{}", std::lround(m), e) : fmt::format("{:g}", lr);
}

std::string recipe_label(double lr, int steps) {
  return steps % 1000 ? fmt::format("{}/{}", lr_label(lr), steps) : fmt::format("{}/{}k", lr_label(lr), steps / 1000);
}

void add(Plan& p, const train::TrainConfig& c, const std::string& what) {
  try {
    c.validate();
    p.runs.push_back(c);
  } catch (const std::invalid_argument& e) {
    if (std::none_of(p.blocked.begin(), p.blocked.end(), [&](const BlockedRun& b) { return b.reason == e.what(); }))
      p.blocked.push_back({what, e.what()});
  }
}

std::vector<int> keep_pairs(const StudyOptions& o, std::vector<int> ns) {
  if (o.recipe_pairs.empty()) return ns;
  std::erase_if(ns, [&](int n) { return std::find(o.recipe_pairs.begin(), o.recipe_pairs.end(), n) == o.recipe_pairs.end(); });
  return ns;
}

std::string describe(const StudyOptions& o) {
  std::string s = "- Recipe (Tables 3, 6): L = 2, d = 128, H = 4, d_h = 32 unless stated, FFN 256, vocabulary 128; AdamW (0.9, 0.999, "
                  "eps 1e-8, weight decay 1e-2), lr 3e-4 unless stated, 10% warm-up then cosine to 0, clip 1.0, float32; MQAR batch 64, "
                  "copy batch 32; evaluation on 15 held-out batches of 64 (exact match per query position); seeds 42, 123, 999 unless "
                  "stated (3 seeds also where the paper ran seed 42 alone).\n";
  if (o.quick)
    s += "- **--quick shrink**: d = 32, d_h / 4, FFN 64, steps / 100 (10 to 40), batch 8 (copy: 4, T = 16), one evaluation "
         "batch of 16, the first two seeds.\n";
  if (!o.seeds.empty()) s += fmt::format("- Seeds set on the command line: {}.\n", fmt::join(o.seeds, ", "));
  if (!o.recipe_pairs.empty()) s += fmt::format("- The recipe studies restricted to n in {{{}}} (--pairs).\n", fmt::join(o.recipe_pairs, ", "));
  return s;
}

std::string Cell::mean_sd() const {
  if (not_run()) return "not run";
  if (std::isnan(mean)) return diverged ? fmt::format("diverged ({} of {})", diverged, acc.size()) : "n/a";
  std::string s = std::isnan(sd) ? fmt_value(mean) : fmt::format("{} ± {}", fmt_value(mean), fmt_value(sd));
  if (diverged) s += fmt::format(" ({} diverged)", diverged);
  return s;
}

LogPoint log_at(const RunOutcome& out, double f) {
  if (out.status != RunOutcome::Status::Complete) return {};
  const auto t = read_csv(out.dir / "log.csv");
  const auto step = t.column("step"), eval = t.column("eval_accuracy"), loss = t.column("loss");
  const double want = f * out.cfg.steps;
  LogPoint best;
  double dist = 1e300;
  for (std::size_t i = 0; i < step.size(); ++i)
    if (std::isfinite(eval[i]) && std::abs(step[i] - want) < dist) {
      dist = std::abs(step[i] - want);
      best = {int(step[i]), eval[i], loss[i]};
    }
  return best;
}

double mean_of(const std::vector<double>& x) {
  double s = 0;
  int n = 0;
  for (double v : x)
    if (std::isfinite(v)) { s += v; ++n; }
  return n ? s / n : kNaN;
}

int Cell::escapes() const {
  return int(std::count_if(acc.begin(), acc.end(), [](double a) { return std::isfinite(a) && a > kEscape; }));
}

Cell cell(const StudyContext& ctx, Mqar r, const std::vector<std::uint64_t>& seeds) {
  Cell c;
  double sum = 0;
  int n = 0;
  for (auto s : seeds) {
    r.seed = s;
    const auto& out = ctx.run(mqar(r, ctx.opt));
    c.acc.push_back(out.eval_accuracy);
    c.diverged += out.status == RunOutcome::Status::Diverged;
    c.missing += out.status == RunOutcome::Status::Skipped || out.status == RunOutcome::Status::Interrupted;
    if (std::isfinite(out.eval_accuracy)) { sum += out.eval_accuracy; ++n; }
  }
  if (n) c.mean = sum / n;
  if (n > 1) {
    double ss = 0;
    for (double a : c.acc)
      if (std::isfinite(a)) ss += (a - c.mean) * (a - c.mean);
    c.sd = std::sqrt(ss / (n - 1));
  }
  return c;
}

std::map<std::string, Best> best_recipes(const StudyOptions& o) {
  std::map<std::string, Best> b;
  for (const auto& m : kMixers) b[m] = {};
  const auto f = o.out / "recipe-sensitivity" / "verdict.json";
  if (!std::filesystem::exists(f)) return b;
  const auto v = read_json(f);
  if (v.value("quick", false) != o.quick) return b;
  for (const auto& m : kMixers)
    if (v["facts"]["best"].contains(m)) b[m] = {v["facts"]["best"][m]["lr"].get<double>(), v["facts"]["best"][m]["steps"].get<int>(), true};
  return b;
}

}  // namespace vla::studies::recipe
