// `vla bench chunked-vla`: the chunkwise-parallel VLA (core/rules/vla/chunked.hpp, docs/chunkwise-vla.md)
// beside Algorithm 1's recurrence on the CPU, on the paper's random-input protocol (Sec. 6.2,
// analysis/random_protocol.hpp), in one run:
//   accuracy    ||O - O_mp50||_F / ||O_mp50||_F of both forms in double, float and bfloat16, and of the
//               chunked form in double with its products' operands rounded to TF32 (the GPU's one-pass
//               products, core/product_operands.hpp);
//   conditioning  the two systems each chunk solves: the penalty Gram G = I + U A_c U^T (V1) and the
//               memory's unit lower-triangular I + L (D1), as 2-norm condition numbers (max over chunks);
//   time        microseconds per token of both forms in double, one thread, median of --reps (a CPU
//               reference's cost, not the GPU kernel's: the chunked form's point is its parallel depth).
#include "analysis/chunked_exactness.hpp"
#include "analysis/head_stream.hpp"
#include "cli/list_option.hpp"
#include "cli/median_time.hpp"
#include "cli/mixer_options.hpp"
#include "core/rules/vla/chunked.hpp"
#include "core/rules/vla/rule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

namespace vla::cli {
namespace {

struct ChunkedVlaArgs {
  MixerConfig cfg;  // --mixer (a VLA variant) and the penalty knobs
  int T = 1024, d_head = 32, reps = 5;
  std::vector<int> chunks{5, 10, 20};
  std::uint64_t seed = 42;
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

void run(const ChunkedVlaArgs& a) {
  if (a.T < 1 || a.d_head < 1 || a.reps < 1) throw std::invalid_argument("--T, --d-head, --reps: each must be >= 1");
  for (int c : a.chunks)
    if (c < 1) throw std::invalid_argument(fmt::format("--chunks: each chunk size must be >= 1, got {}", c));
  const VlaOptions opt = VlaRule<Precision<double>>::from_config(a.cfg).options();
  const analysis::HeadStream s = analysis::random_head_stream(a.d_head, a.T, a.seed);
  fmt::print("chunkwise VLA vs Algorithm 1 ({}), CPU, random protocol (Sec. 6.2) seed {}, T = {}, d_h = {}, refresh period {} "
             "(chunks end on refreshes: at most {} tokens)\n",
             a.cfg.mixer, a.seed, a.T, a.d_head, opt.penalty.refresh_period,
             opt.penalty.refresh_period > 0 ? fmt::format("{}", opt.penalty.refresh_period) : std::string("C"));
  const Mat<double> truth = recurrent_O<mp50>(opt, s);
  auto err = [&](const Mat<double>& O) { return (O - truth).norm() / truth.norm(); };
  const double rec_d = err(recurrent_O<double>(opt, s)), rec_f = err(recurrent_O<float>(opt, s)),
               rec_b = err(recurrent_O<bfloat16>(opt, s));
  const double t_rec = median_seconds(a.reps, [&] { (void)recurrent_O<double>(opt, s); });
  fmt::print("\n{:>7} | {:>9} {:>9} {:>9} {:>9} | {:>7} {:>8} {:>8} {:>9} {:>11} | {:>9} {:>9} {:>6}\n", "chunk", "double", "float",
             "bfloat16", "tf32 prod", "chunks", "min eig", "cond G", "bound", "cond(I+L)", "us/token", "rec us", "ratio");
  fmt::print("{:>7} | {:>9.2e} {:>9.2e} {:>9.2e} {:>9} | {:>7} {:>8} {:>8} {:>9} {:>11} | {:>9} {:>9.2f} {:>6}\n", "recur.", rec_d,
             rec_f, rec_b, "-", "-", "-", "-", "-", "-", "-", 1e6 * t_rec / a.T, "-");
  for (int c : a.chunks) {
    const auto cond = analysis::vla_chunk_conditioning(opt, s, c);
    const double t_ch = median_seconds(a.reps, [&] { (void)chunked_O<double>(opt, s, c); });
    // (V1)'s a-priori bound at the largest chunk: lambda_max(G) <= 1 + ||A_c|| n / d, ||A_c|| <= 1/lambda0 + m eta.
    const int n = opt.penalty.refresh_period > 0 ? std::min(c, opt.penalty.refresh_period) : c;
    const int refreshes = opt.penalty.refresh_period > 0 ? a.T / opt.penalty.refresh_period : 0;
    const double bound = 1 + (1 / opt.penalty.lambda0 + refreshes * opt.penalty.refresh_eta) * n / a.d_head;
    fmt::print("{:>7} | {:>9.2e} {:>9.2e} {:>9.2e} {:>9.2e} | {:>7} {:>8.4f} {:>8.3f} {:>9.3f} {:>11.3g} | {:>9.2f} {:>9.2f} {:>6.2f}\n", c,
               err(chunked_O<double>(opt, s, c)), err(chunked_O<float>(opt, s, c)), err(chunked_O<bfloat16>(opt, s, c)),
               err(chunked_O<double>(opt, s, c, ProductOperands::Tf32)), cond.chunks,
               cond.gram_eig_min, cond.gram_cond_max, bound, cond.solve_cond_max, 1e6 * t_ch / a.T, 1e6 * t_rec / a.T, t_ch / t_rec);
  }
  fmt::print("\naccuracy: ||O - O_mp50||_F / ||O_mp50||_F, every operation in that format (tf32 prod: double, each matrix "
             "product's operands rounded to TF32); cond: 2-norm, max over chunks "
             "(bound: (V1)'s a-priori lambda_max(G)); time: double, one thread, median of {}\n", a.reps);
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
  sc->final_callback([args] { run(*args); });
}

}  // namespace vla::cli
