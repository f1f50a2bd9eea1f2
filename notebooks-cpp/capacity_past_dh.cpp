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

#include <cmath>
#include <map>

using namespace vla;

int main() {
  const std::vector<double> ratios{0.25, 0.5, 0.75, 1.0, 1.5, 2.0};
  const std::vector<std::string> mixers{"vla", "deltanet", "linear"};

  //md ## 1. Untrained: write n pairs, read them back
  //md
  //md Random unit keys from the positive orthant (the keys a rule sees after phi = ELU + 1 and normalisation),
  //md values N(0, I), one token per pair; the error is max_i ||S_n k_hat_i - v_i|| / ||v_i||, in double.
  //md `vla-key` is VLA with u = k_hat / sqrt(d_h) (the penalty aligned with the key, Sec. 7.1's whitening
  //md case); DeltaNet runs ungated.
  analysis::RecoveryConfig rc;
  rc.d_head = nb::quick() ? 8 : 32;
  rc.ns.clear();
  for (double r : ratios) rc.ns.push_back(int(std::lround(r * rc.d_head)));
  rc.key_kinds = {"random"};
  rc.mixers = {"vla", "vla-key", "deltanet", "linear"};
  rc.precisions = {"double"};
  std::map<std::pair<std::string, int>, double> err;
  for (const auto& p : analysis::run_recovery(rc)) err[{p.mixer, p.n}] = p.max_rel_error;
  std::string head = "| n / d_h |", rule = "|---|";
  for (const auto& m : rc.mixers) { head += " " + m + " |"; rule += "---|"; }
  nb::markdown(head);
  nb::markdown(rule);
  for (std::size_t i = 0; i < ratios.size(); ++i) {
    std::string row = fmt::format("| {:.2f} (n = {}) |", ratios[i], rc.ns[i]);
    for (const auto& m : rc.mixers) row += fmt::format(" {:.3g} |", err[{m, rc.ns[i]}]);
    nb::markdown(row);
  }
  fmt::print("d_h = {}, random keys, seed {}, max relative recovery error\n", rc.d_head, rc.seed);
  NB_SHOW();

  //md DeltaNet and linear attention recover random keys exactly only while the keys are orthogonal enough;
  //md Algorithm 1's VLA (u from a random W_u) already misses at small n: its write direction is
  //md unit(A_t k_hat), not the least-squares one (the ledger's `prop3-exact-recovery`).
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
  //md Untrained, the rules themselves show where exact storage ends: the error rises from rounding level
  //md towards O(1) as the keys stop being independent, and past n = d_h no linear memory of width d_h can
  //md hold every pair. Trained, the model must also learn keys that the rule can separate, which is what the
  //md MQAR plateau (docs/training.md) is about; the full-size, multi-seed version of this comparison at each
  //md mixer's best recipe is the study `recipe-capacity` (reports/recipe-capacity/).
  return 0;
}
