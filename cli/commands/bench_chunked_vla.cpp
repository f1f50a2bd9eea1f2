// `vla bench chunked-vla`: the chunkwise-parallel VLA (core/rules/vla/chunked.hpp, docs/chunkwise-vla.md)
// beside Algorithm 1's recurrence on the CPU, on the paper's random-input protocol (Sec. 6.2,
// analysis/random_protocol.hpp) or, with --checkpoint, on the inputs a trained model's heads see
// (analysis/model_head_streams.hpp; the table then the worst over its heads and sequences), in one run:
//   accuracy    ||O - O_mp50||_F / ||O_mp50||_F of both forms in double, float and bfloat16, and of the
//               chunked form in double with its products' operands rounded to TF32 (the GPU's one-pass
//               products, core/product_operands.hpp);
//   conditioning  the two systems each chunk solves: the penalty Gram G = I + U A_c U^T (V1) and the
//               memory's unit lower-triangular I + L (D1), as 2-norm condition numbers (max over chunks);
//   time        (random protocol) microseconds per token of both forms in double, one thread, median of --reps
//               (a CPU reference's cost, not the GPU kernel's: the chunked form's point is its parallel depth).
#include "analysis/chunked_exactness.hpp"
#include "analysis/head_stream.hpp"
#include "analysis/direction_spread.hpp"
#include "analysis/model_head_streams.hpp"
#include "cli/list_option.hpp"
#include "cli/median_time.hpp"
#include "cli/mixer_options.hpp"
#include "core/rules/vla/chunked.hpp"
#include "core/rules/vla/rule.hpp"
#include "core/train/checkpoint.hpp"
#include "core/train/tasks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace vla::cli {
namespace {

struct ChunkedVlaArgs {
  MixerConfig cfg;  // --mixer (a VLA variant) and the penalty knobs
  int T = 1024, d_head = 32, reps = 5;
  std::vector<int> chunks{5, 10, 20};
  std::uint64_t seed = 42;
  std::string checkpoint;  // a trained model's inputs instead of the random protocol's
  int sequences = 4;
};

template <class T> Mat<T> rows(const Mat<double>& m) { return cast_matrix<T>(Mat<double>(m.transpose())); }

template <class T>
Mat<double> chunked_O(const VlaOptions& opt, const analysis::HeadStream& s, int chunk, ProductOperands ops = ProductOperands::Full) {
  return cast_matrix<double>(
      vla_chunked<T>(vla_features<T>(rows<T>(s.q), rows<T>(s.k), rows<T>(s.u), opt), rows<T>(s.v), opt, chunk, {}, nullptr, ops).O);
}
template <class T> Mat<double> recurrent_O(const VlaOptions& opt, const analysis::HeadStream& s) {
  return cast_matrix<double>(analysis::rule_outputs<T>(VlaRule<Precision<T>>(opt), s));
}

// One form's measurements on one stream (the recurrence's: no conditioning), or their worst over streams.
struct FormRow {
  double err_d = 0, err_f = 0, err_b = 0, err_tf32 = 0;  // ||O - O_mp50||_F / ||O_mp50||_F
  analysis::VlaChunkConditioning cond;
  void worst_with(const FormRow& o) {
    err_d = std::max(err_d, o.err_d); err_f = std::max(err_f, o.err_f); err_b = std::max(err_b, o.err_b);
    err_tf32 = std::max(err_tf32, o.err_tf32);
    cond.chunks = std::max(cond.chunks, o.cond.chunks);
    cond.gram_eig_min = std::min(cond.gram_eig_min, o.cond.gram_eig_min);
    cond.gram_cond_max = std::max(cond.gram_cond_max, o.cond.gram_cond_max);
    cond.solve_cond_max = std::max(cond.solve_cond_max, o.cond.solve_cond_max);
    cond.solve_inv_norm_max = std::max(cond.solve_inv_norm_max, o.cond.solve_inv_norm_max);
  }
};

// Row 0 the recurrence, then one row per chunk size, on one stream.
std::vector<FormRow> measure(const VlaOptions& opt, const analysis::HeadStream& s, const std::vector<int>& chunks) {
  const Mat<double> truth = recurrent_O<mp50>(opt, s);
  auto err = [&](const Mat<double>& O) { return (O - truth).norm() / truth.norm(); };
  std::vector<FormRow> r(chunks.size() + 1);
  r[0].err_d = err(recurrent_O<double>(opt, s));
  r[0].err_f = err(recurrent_O<float>(opt, s));
  r[0].err_b = err(recurrent_O<bfloat16>(opt, s));
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const int c = chunks[i];
    FormRow& f = r[i + 1];
    f.err_d = err(chunked_O<double>(opt, s, c));
    f.err_f = err(chunked_O<float>(opt, s, c));
    f.err_b = err(chunked_O<bfloat16>(opt, s, c));
    f.err_tf32 = err(chunked_O<double>(opt, s, c, ProductOperands::Tf32));
    f.cond = analysis::vla_chunk_conditioning(opt, s, c);
  }
  return r;
}

// The table: accuracy and conditioning per form; with `times` (random protocol) the CPU time per token too.
void print_table(const VlaOptions& opt, const std::vector<FormRow>& r, const std::vector<int>& chunks, int T, int d_head,
                 const std::vector<double>* times) {
  const auto us = [&](std::size_t i) { return times ? fmt::format("{:.2f}", 1e6 * (*times)[i] / T) : std::string("-"); };
  fmt::print("\n{:>7} | {:>9} {:>9} {:>9} {:>9} | {:>7} {:>8} {:>8} {:>9} {:>11} | {:>9} {:>9} {:>6}\n", "chunk", "double", "float",
             "bfloat16", "tf32 prod", "chunks", "min eig", "cond G", "bound", "cond(I+L)", "us/token", "rec us", "ratio");
  fmt::print("{:>7} | {:>9.2e} {:>9.2e} {:>9.2e} {:>9} | {:>7} {:>8} {:>8} {:>9} {:>11} | {:>9} {:>9} {:>6}\n", "recur.", r[0].err_d,
             r[0].err_f, r[0].err_b, "-", "-", "-", "-", "-", "-", "-", us(0), "-");
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const int c = chunks[i];
    const FormRow& f = r[i + 1];
    const double bound = analysis::vla_gram_bound(opt, T, d_head, c);
    fmt::print("{:>7} | {:>9.2e} {:>9.2e} {:>9.2e} {:>9.2e} | {:>7} {:>8.4f} {:>8.3f} {:>9.3f} {:>11.3g} | {:>9} {:>9} {:>6}\n", c, f.err_d,
               f.err_f, f.err_b, f.err_tf32, f.cond.chunks, f.cond.gram_eig_min, f.cond.gram_cond_max, bound, f.cond.solve_cond_max,
               us(i + 1), us(0), times ? fmt::format("{:.2f}", (*times)[i + 1] / (*times)[0]) : std::string("-"));
  }
}

void run_random(const ChunkedVlaArgs& a, const VlaOptions& opt) {
  const analysis::HeadStream s = analysis::random_head_stream(a.d_head, a.T, a.seed);
  fmt::print("chunkwise VLA vs Algorithm 1 ({}), CPU, random protocol (Sec. 6.2) seed {}, T = {}, d_h = {}, refresh period {} "
             "(chunks end on refreshes: at most {} tokens)\n",
             a.cfg.mixer, a.seed, a.T, a.d_head, opt.penalty.refresh_period,
             opt.penalty.refresh_period > 0 ? fmt::format("{}", opt.penalty.refresh_period) : std::string("C"));
  const std::vector<FormRow> r = measure(opt, s, a.chunks);
  std::vector<double> times{median_seconds(a.reps, [&] { (void)recurrent_O<double>(opt, s); })};
  for (int c : a.chunks) times.push_back(median_seconds(a.reps, [&] { (void)chunked_O<double>(opt, s, c); }));
  print_table(opt, r, a.chunks, a.T, a.d_head, &times);
  fmt::print("\naccuracy: ||O - O_mp50||_F / ||O_mp50||_F, every operation in that format (tf32 prod: double, each matrix "
             "product's operands rounded to TF32); cond: 2-norm, max over chunks "
             "(bound: (V1)'s a-priori lambda_max(G)); time: double, one thread, median of {}\n", a.reps);
}

// A trained model's heads: every (sequence, layer, head) of `sequences` batch sequences of its task, each
// measured as above, the table their worst; the streams that set the worst float error and cond(I + L) named.
void run_trained(const ChunkedVlaArgs& a, const train::Checkpoint& ck, const VlaOptions& opt, bool t_given) {
  train::TaskConfig task = ck.cfg.task;
  if (t_given) {  // MQAR with filler (or copy) at this length, within the model's positional table
    task.seq_len = a.T;
    try {
      task.validate();
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("--T: {} tokens do not make a sequence of the model's task ({})", a.T, e.what()));
    }
    if (a.T > ck.cfg.model.max_len)
      throw std::invalid_argument(fmt::format("--T: {} tokens; the model's positional table has {} rows (its --max-len)", a.T, ck.cfg.model.max_len));
  }
  const train::Batch batch = train::make_batch(task, a.sequences, a.seed);
  const auto streams = analysis::model_head_streams(ck.cfg.model, ck.p.cast<double>(), batch.tokens);
  const int T = task.length();
  fmt::print("chunkwise VLA vs Algorithm 1 ({}), CPU, the inputs of a trained model's heads: '{}' (step {}, {} {}, T = {}), "
             "{} sequences (seed {}) x {} layers x {} heads, d_h = {}, refresh period {}\n",
             ck.cfg.model.mixer.mixer, a.checkpoint, ck.step, task.task, task.task == "mqar" ? fmt::format("n = {}", task.pairs) : "",
             T, a.sequences, a.seed, ck.cfg.model.layers, ck.cfg.model.heads, ck.cfg.model.d_head, opt.penalty.refresh_period);
  std::vector<FormRow> worst(a.chunks.size() + 1);
  for (auto& w : worst) w.cond.gram_eig_min = std::numeric_limits<double>::infinity();
  const analysis::ModelHeadStream* worst_f = nullptr;
  const analysis::ModelHeadStream* worst_cond = nullptr;
  double wf = -1, wc = -1;
  for (std::size_t i = 0; i < streams.size(); ++i) {
    const auto r = measure(opt, streams[i].s, a.chunks);
    for (std::size_t j = 0; j < r.size(); ++j) worst[j].worst_with(r[j]);
    if (r.back().err_f > wf) { wf = r.back().err_f; worst_f = &streams[i]; }
    if (r.back().cond.solve_cond_max > wc) { wc = r.back().cond.solve_cond_max; worst_cond = &streams[i]; }
    fmt::print(stderr, "\r{} of {} head streams", i + 1, streams.size());
  }
  fmt::print(stderr, "\n");
  print_table(opt, worst, a.chunks, T, ck.cfg.model.d_head, nullptr);
  // How parallel the heads' penalty directions are: (V1)'s Gram reaches its bound 1 + ||A_c|| n / d only when a
  // chunk's u_t are parallel (and along A_c's top eigenvector).
  fmt::print("\npenalty directions u_t, per head: mean |cos(u_t, u_s)| over the token pairs of a sequence / their participation "
             "ratio (directions spanned, of d_h = {}), each averaged over the sequences:\n", ck.cfg.model.d_head);
  for (int l = 0; l < ck.cfg.model.layers; ++l) {
    std::vector<std::string> per_head;
    for (int h = 0; h < ck.cfg.model.heads; ++h) {
      double cos = 0, pr = 0;
      int n = 0;
      for (const auto& m : streams)
        if (m.layer == l && m.head == h && m.s.T >= 2) {
          cos += analysis::mean_abs_cosine(m.s.u);
          pr += analysis::participation_ratio(m.s.u);
          ++n;
        }
      per_head.push_back(n > 0 ? fmt::format("{:.3f} / {:.2f}", cos / n, pr / n) : std::string("-"));
    }
    fmt::print("  layer {}: {}\n", l, fmt::join(per_head, ", "));
  }
  const auto name = [](const analysis::ModelHeadStream* m) { return fmt::format("sequence {}, layer {}, head {}", m->sequence, m->layer, m->head); };
  fmt::print("\nevery column the worst over the {} head streams; at chunk {}: float error worst at {} ({:.2e}), cond(I+L) at {} ({:.3g})\n"
             "accuracy: ||O - O_mp50||_F / ||O_mp50||_F, every operation in that format (tf32 prod: double, each matrix product's "
             "operands rounded to TF32); cond: 2-norm, max over chunks (bound: (V1)'s a-priori lambda_max(G))\n",
             streams.size(), a.chunks.back(), name(worst_f), wf, name(worst_cond), wc);
}

void run(const ChunkedVlaArgs& a, const CLI::App& sc) {
  if (a.T < 1 || a.d_head < 1 || a.reps < 1) throw std::invalid_argument("--T, --d-head, --reps: each must be >= 1");
  if (a.sequences < 1) throw std::invalid_argument(fmt::format("--sequences: must be >= 1, got {}", a.sequences));
  if (a.chunks.empty()) throw std::invalid_argument("--chunks: give at least one chunk size");
  for (int c : a.chunks)
    if (c < 1) throw std::invalid_argument(fmt::format("--chunks: each chunk size must be >= 1, got {}", c));
  if (a.checkpoint.empty()) return run_random(a, VlaRule<Precision<double>>::from_config(a.cfg).options());
  const train::Checkpoint ck = train::read_checkpoint(a.checkpoint, "--checkpoint");
  const auto& variants = VlaOptions::kVariants;
  if (std::find(variants.begin(), variants.end(), ck.cfg.model.mixer.mixer) == variants.end())
    throw std::invalid_argument(fmt::format("--checkpoint: '{}' trained mixer '{}'; the chunked VLA reads a VLA variant's heads ({})", a.checkpoint,
                                            ck.cfg.model.mixer.mixer, fmt::join(variants, ", ")));
  if (sc.count("--mixer") || sc.count("--d-head"))
    throw std::invalid_argument("--mixer, --d-head: with --checkpoint they are the trained model's");
  // The model's penalty settings; a knob flag given on the command line overrides its own (e.g. the refresh off,
  // so that chunks may pass its period).
  MixerConfig cfg = ck.cfg.model.mixer, given = a.cfg;
  for_each_knob(cfg, [&](auto km) {
    const std::string_view flag = mixer_flag(km.name);
    const CLI::Option* given_flag = flag.empty() ? nullptr : sc.get_option_no_throw(std::string(flag));
    if (!given_flag || given_flag->count() == 0) return;
    for_each_knob(given, [&](auto kc) {
      if constexpr (std::is_same_v<typename std::decay_t<decltype(km)>::value_type, typename std::decay_t<decltype(kc)>::value_type>)
        if (kc.name == km.name) km.value = kc.value;
    });
  });
  run_trained(a, ck, VlaRule<Precision<double>>::from_config(cfg).options(), sc.count("--T") > 0);
}

}  // namespace

void add_bench_chunked_vla(CLI::App& bench) {
  auto args = std::make_shared<ChunkedVlaArgs>();
  auto* sc = bench.add_subcommand("chunked-vla", "the chunkwise-parallel VLA beside Algorithm 1 (CPU): accuracy vs mp50, conditioning, time");
  sc->add_option("--mixer", args->cfg.mixer, "a VLA variant (vla, vla-v2, vla-rls, vla-fixed-a, vla-no-knorm)")
      ->check(CLI::IsMember(std::vector<std::string>(VlaOptions::kVariants.begin(), VlaOptions::kVariants.end())));
  add_mixer_options(*sc, args->cfg, {"rank", "next_latent"});  // rank 1: the chunked form refuses r > 1
  sc->add_option("--T", args->T, "tokens");
  sc->add_option("--d-head", args->d_head, "head size d_h");
  add_list_option(*sc, "--chunks", args->chunks, "chunk sizes, comma separated");
  sc->add_option("--seed", args->seed, "seed of the random protocol");
  sc->add_option("--reps", args->reps, "timed runs per form (median reported)");
  sc->add_option("--checkpoint", args->checkpoint,
                 "a trained VLA model's checkpoint.bin: its heads' inputs on --sequences sequences of its task (seed --seed; "
                 "--T: another length) instead of the random protocol; its penalty settings unless a flag is given")
      ->check(CLI::ExistingFile);
  sc->add_option("--sequences", args->sequences, "with --checkpoint: task sequences, each measured at every layer and head");
  sc->final_callback([args, sc] { run(*args, *sc); });
}

}  // namespace vla::cli
