#pragma once
// The paper's training recipe (Tables 3 and 6) as TrainConfigs, one builder for every study, so that
// studies asking for the same run build the same config and share it through the run store:
//   model L = 2, d = 128, H = 4, d_h = 32, FFN 256, vocabulary 128 (core/model/config.hpp defaults);
//   AdamW (0.9, 0.999), eps 1e-8, weight decay 1e-2, lr 3e-4, 10% warm-up then cosine, clip 1.0;
//   MQAR batch 64, copy batch 32 (T = 64); evaluation 15 batches of 64 (960 samples);
//   seeds 42, 123, 999 (Sec. 5.3, Table 6) everywhere, also where the paper ran seed 42 alone.
// Steps are each study's (MQAR: 2000 in Table 6 / App. B.1 and Table 8, 3000 in Table 3 / Sec. 5.4;
// 1000 in Tables 4, 10-13; copy 1500). The evaluation cadence is one per run length (every 100 MQAR
// steps, every 50 copy steps) so that the curves of Tables 7 and 8 come from the same runs as the
// final numbers.
//
// --quick shrinks every run the same way (so quick runs share exactly as full ones do): widths / 4
// (d = 32, d_h = d_h / 4, FFN 64), steps / 100 (10 to 40), batch 8 (copy 4, T = 16), one evaluation
// batch of 16, two seeds. It checks that the study runs end to end; its numbers mean nothing.
#include "studies/study.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace vla::studies::recipe {

inline const std::vector<std::uint64_t> kPaperSeeds{42, 123, 999};
inline const std::vector<std::string> kMixers{"softmax", "linear", "deltanet", "vla"};  // the paper's four (Sec. 5.1)
// A run "leaves the plateau" when its final MQAR eval exact match exceeds this: the "values present"
// plateau is at most ~0.17 (n = 8) and falls with n (the rate of guessing one of the n values present), so
// 0.5 is far above it at every n and below every solved run the paper reports (>= 0.62).
inline constexpr double kEscape = 0.5;

// One MQAR run of the paper's recipe, with the knobs the studies vary.
struct Mqar {
  std::string mixer = "vla";
  int pairs = 8;
  std::uint64_t seed = 42;
  int steps = 2000;
  double lr = 3e-4;
  int d_head = 32;
  bool ood = false;        // evaluate with keys never seen as keys (Table 13)
  int seq_len = 0;         // 0: T = 3n + 1; longer: the long-context layout (core/train/tasks.hpp)
};

train::TrainConfig mqar(const Mqar& r, const StudyOptions& o);
// The copy task of Table 7: T = 64, batch 32, 1500 steps.
train::TrainConfig copy(const std::string& mixer, std::uint64_t seed, const StudyOptions& o);

// The seeds a study runs: --seeds if given, else `full` (quick: its first two).
std::vector<std::uint64_t> seeds(const StudyOptions& o, const std::vector<std::uint64_t>& full = kPaperSeeds);

// A learning rate as the report writes it: 3e-4, 1e-3; a recipe: "3e-4/2k" (lr / thousands of steps).
std::string lr_label(double lr);
std::string recipe_label(double lr, int steps);

// A point of recipe-sensitivity's grid (lr x steps), and that study's seeds: penalty-selectivity reads VLA's
// runs at some of its points, the same configs, so one run store trains them once.
struct Recipe {
  double lr;
  int steps;
  std::string label() const { return recipe_label(lr, steps); }
};
inline const std::vector<std::uint64_t> kRecipeSeeds{42, 123, 999, 1, 2};

// Adds the run to the plan, or, when the toolkit cannot express it (TrainConfig::validate throws), a
// BlockedRun with `what` and the validation's message.
void add(Plan& p, const train::TrainConfig& c, const std::string& what);

// ns without the n that --pairs (StudyOptions::recipe_pairs) leaves out.
std::vector<int> keep_pairs(const StudyOptions& o, std::vector<int> ns);

// One line for the settings section: the recipe and, for --quick, the shrink.
std::string describe(const StudyOptions& o);

// A mixer's best recipe as recipe-sensitivity found it (its verdict.json under StudyOptions::out, at the
// same --quick), or the paper's (lr 3e-4, 2000 steps; from_study false) where that study has not run.
struct Best {
  double lr = 3e-4;
  int steps = 2000;
  bool from_study = false;
};
std::map<std::string, Best> best_recipes(const StudyOptions& o);

// The eval accuracies of a set of runs, over seeds: per seed (NaN for a diverged run), mean and sample
// standard deviation over the finite ones, and how many diverged.
struct Cell {
  std::vector<double> acc;
  double mean = kNaN, sd = kNaN;
  int diverged = 0;
  int missing = 0;               // runs not made (skipped: no kernel on the device and no fallback)
  bool not_run() const { return !acc.empty() && missing == int(acc.size()); }
  int escapes() const;           // seeds that left the plateau (finite eval > kEscape)
  std::string mean_sd() const;  // "0.172 ± 0.003" (n/a when nothing finished)
};
Cell cell(const StudyContext& ctx, Mqar r, const std::vector<std::uint64_t>& seeds);

// A run's evaluation nearest to the fraction f of its steps (so a paper step s of an N-step run reads the
// same point of a --quick run: f = s / N), with the training loss of that step.
struct LogPoint {
  int step = 0;
  double eval = kNaN, loss = kNaN;
};
LogPoint log_at(const RunOutcome& out, double f);
// Mean over the finite values (NaN if none).
double mean_of(const std::vector<double>& x);

}  // namespace vla::studies::recipe
