//md # How capacity degrades past d_h: untrained (Prop. 3) and trained
//md
//md Prop. 3 of the VLA paper: after writing n <= d_h pairs with linearly independent keys, S_n k_hat_i = v_i
//md exactly, so a head of width d_h holds d_h associations (Sec. 4.3, Sec. 8). Two questions: how does
//md recall degrade as n passes d_h when the memory is driven directly (no training, analysis/recovery.hpp),
//md and what does a trained model do at the same n / d_h (core/train, MQAR)? The first is exact
//md arithmetic on the rules themselves; the second adds everything a network has to learn.
#include "analysis/plot.hpp"
#include "analysis/recovery.hpp"
#include "core/io/csv.hpp"
#include "core/train/trainer.hpp"
#include "notebooks-cpp/notebook.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>

using namespace vla;

int main() {
  const std::vector<double> ratios{0.25, 0.5, 0.75, 1.0, 1.5, 2.0};
  const std::vector<std::string> mixers{"vla", "deltanet", "linear"};

  //md ## 1. Untrained: write n pairs, read them back
  //md
  //md Two kinds of unit keys: orthonormal (they exist for n <= d_h only) and random from the positive orthant
  //md (the keys a rule sees after phi = ELU + 1 and normalisation: linearly independent for n <= d_h, but far
  //md from orthogonal). Values N(0, I), one token per pair; the error is max_i ||S_n k_hat_i - v_i|| /
  //md ||v_i||, in double. `vla-key` is VLA with u = k_hat / sqrt(d_h) (the penalty aligned with the key,
  //md Sec. 7.1's whitening case); DeltaNet runs ungated; `rls-classical` is the recursive least-squares
  //md memory with lambda0 -> 0, i.e. S_n = V K^+, the memory Prop. 3's "n <= d_h independent keys" describes.
  analysis::RecoveryConfig rc;
  rc.d_head = nb::quick() ? 8 : 32;
  rc.mixers = {"vla", "vla-key", "deltanet", "linear", "rls-classical"};
  rc.precisions = {"double"};
  std::vector<int> ns;
  for (double r : ratios) ns.push_back(int(std::lround(r * rc.d_head)));
  std::map<std::tuple<std::string, std::string, int>, double> err;  // (mixer, keys, n) -> max relative error
  for (const std::string keys : {"orthonormal", "random"}) {
    rc.key_kinds = {keys};
    rc.ns.clear();
    for (int n : ns)
      if (keys == "random" || n <= rc.d_head) rc.ns.push_back(n);  // no orthonormal set is larger than d_h
    for (const auto& p : analysis::run_recovery(rc)) err[{p.mixer, keys, p.n}] = p.max_rel_error;
  }
  const auto cell = [&](const std::string& m, const std::string& keys, int n) {
    const auto it = err.find({m, keys, n});
    return it == err.end() ? std::string("—") : fmt::format("{:.2g}", it->second);
  };
  std::string head = "| n / d_h |", rule = "|---|";
  for (const auto& m : rc.mixers) { head += " " + m + " |"; rule += "---|"; }
  nb::markdown(head + " (each cell: orthonormal / random keys)");
  nb::markdown(rule);
  for (std::size_t i = 0; i < ratios.size(); ++i) {
    std::string row = fmt::format("| {:.2f} (n = {}) |", ratios[i], ns[i]);
    for (const auto& m : rc.mixers) row += " " + cell(m, "orthonormal", ns[i]) + " / " + cell(m, "random", ns[i]) + " |";
    nb::markdown(row);
  }
  // Where each rule stores: the largest n of the table with an error <= 1e-6, far below the O(0.1 .. 1) misses
  // (rls-classical's own error grows with its lambda0 = 1e-10 and the conditioning of the keys).
  constexpr double kExact = 1e-6;
  fmt::print("d_h = {}, seed {}; the largest n stored (max relative error <= {:.0e}):\n", rc.d_head, rc.seed, kExact);
  for (const auto& m : rc.mixers) {
    std::string line = fmt::format("  {:14s}", m);
    for (const std::string keys : {"orthonormal", "random"}) {
      int best = 0;
      for (int n : ns)
        if (const auto it = err.find({m, keys, n}); it != err.end() && it->second <= kExact) best = std::max(best, n);
      line += fmt::format("  {} keys: {}", keys, best > 0 ? fmt::format("n = {}", best) : std::string("none"));
    }
    fmt::print("{}\n", line);
  }
  NB_SHOW();

  //md At full size (d_h = 32) the lines above read: with orthonormal keys the delta rule, linear attention,
  //md `vla-key` and least squares store every n <= d_h, and Algorithm 1's VLA stores none (its write
  //md direction is unit(A_t k_hat), not the key: aligned with the key, as `vla-key`, it does); with the keys
  //md phi produces only least squares stores n = d_h, and every sequential write misses by O(1) from
  //md n = d_h / 4 on (the keys are independent, but far from orthogonal). Past n = d_h nothing stores every
  //md pair, least squares included.
  //md
  //md ## 2. Trained: MQAR at the same n / d_h
  //md
  //md A small model (d = 32, H = 2, FFN 64) with head width d_h, trained on MQAR with n pairs for each
  //md n / d_h above (up to the 63 distinct keys the vocabulary has), lr 3e-3, in float on the CPU
  //md (vla::train::train_many, nothing written to disk). Quick mode trains for a handful of steps: its
  //md numbers only show that the notebook runs.
  std::vector<train::TrainConfig> runs;
  const int dh = nb::quick() ? 4 : 8;
  for (const auto& m : mixers)
    for (double r : ratios) {
      train::TrainConfig c;
      c.model.d_model = 32; c.model.heads = 2; c.model.d_head = dh; c.model.ffn = 64; c.model.mixer.mixer = m;
      c.task.pairs = std::min(63, int(std::lround(r * dh)));
      c.steps = nb::quick() ? 10 : 600;
      c.batch = nb::quick() ? 8 : 32;
      c.opt.lr = 3e-3;
      c.eval_batches = nb::quick() ? 1 : 4;
      c.eval_batch = 64;
      c.seed = 42;
      runs.push_back(c);
    }
  const auto res = train::train_many(runs, std::vector<std::filesystem::path>(runs.size()), train::RunOptions{});
  io::CsvTable t({"ratio", "vla", "deltanet", "linear"});
  nb::markdown(fmt::format("| n / d_h (d_h = {}) | vla | deltanet | linear |", dh));
  nb::markdown("|---|---|---|---|");
  for (std::size_t i = 0; i < ratios.size(); ++i) {
    std::vector<double> row{ratios[i]};
    for (std::size_t k = 0; k < mixers.size(); ++k) row.push_back(res[k * ratios.size() + i].eval_accuracy);
    t.add_row(row);
    nb::markdown(fmt::format("| {:.2f} (n = {}) | {:.3f} | {:.3f} | {:.3f} |", ratios[i], runs[i].task.pairs, row[1], row[2], row[3]));
  }
  t.write(nb::dir() / "capacity_trained.csv");
  auto spec = analysis::plot_spec(fmt::format("MQAR eval accuracy vs n / d_h (d_h = {}, {} steps)", dh, runs[0].steps), "n / d_h",
                                  "eval exact match");
  spec.with = "linespoints";
  spec.extra = "set yrange [0:1.05]\nset arrow from 1, graph 0 to 1, graph 1 nohead dt 2\n";
  spec.series = {{2, "VLA"}, {3, "DeltaNet"}, {4, "linear attention"}};
  analysis::plot_csv(nb::dir() / "capacity_trained.csv", nb::dir() / "capacity_trained.png", spec);
  nb::image(nb::dir() / "capacity_trained.png", "Trained recall against n / d_h (dashed: n = d_h)");
  double best_past = 0;
  std::string who;
  for (std::size_t k = 0; k < mixers.size(); ++k)
    for (std::size_t i = 0; i < ratios.size(); ++i)
      if (ratios[i] > 1 && res[k * ratios.size() + i].eval_accuracy > best_past) {
        best_past = res[k * ratios.size() + i].eval_accuracy;
        who = fmt::format("{} at n / d_h = {:.2f}", mixers[k], ratios[i]);
      }
  fmt::print("best recall past n = d_h: {:.3f} ({})\n", best_past, who);
  NB_SHOW();

  //md ## What this says
  //md
  //md Untrained, Prop. 3's capacity of d_h pairs is the least-squares memory's. The rules reach it only with
  //md orthonormal keys (Algorithm 1's VLA not even there); with the positive keys phi produces, none of the
  //md sequential writes does. Trained at this small scale (600 steps, one seed), recall stays far below that
  //md capacity at every n: the MQAR plateau of docs/training.md. The full-size, multi-seed version at each
  //md mixer's best recipe is the study `recipe-capacity` (reports/recipe-capacity/).
  return 0;
}
