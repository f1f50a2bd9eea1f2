#include "core/train/tasks.hpp"

#include <fmt/format.h>

#include <random>
#include <stdexcept>

namespace vla::train {

void TaskConfig::validate() const {
  if (task == "mqar") {
    const int nkeys = kKeyHi - kKeyLo + 1, nood = kOodKeyHi - kOodKeyLo + 1;
    if (pairs < 1 || pairs > std::min(nkeys, nood))
      throw std::invalid_argument(fmt::format("--pairs: MQAR needs 1 <= n <= {} distinct keys in the vocabulary of {}, got {}",
                                              std::min(nkeys, nood), kVocab, pairs));
    if (seq_len != 0 && seq_len < 3 * pairs + 1)
      throw std::invalid_argument(fmt::format("--seq-len: MQAR with n = {} needs T >= 3n + 1 = {} (or 0: T = 3n + 1), got {}",
                                              pairs, 3 * pairs + 1, seq_len));
  } else if (task == "copy") {
    if (seq_len < 4 || seq_len % 2)
      throw std::invalid_argument(fmt::format("--seq-len: copy needs an even T >= 4, got {}", seq_len));
  } else {
    throw std::invalid_argument(fmt::format("--task: unknown task '{}' (allowed: mqar, copy)", task));
  }
}

std::uint64_t batch_seed(std::uint64_t seed, std::uint64_t index) {
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ULL + index + 0x632BE59BD9B4E019ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

namespace {
// Uniform integer in [lo, hi] by rejection-free modulo (bias < 2^-50 for these ranges); written out
// because std::uniform_int_distribution's algorithm is implementation-defined.
int draw(std::mt19937_64& g, int lo, int hi) { return lo + int(g() % std::uint64_t(hi - lo + 1)); }
}  // namespace

Batch make_batch(const TaskConfig& task, int batch, std::uint64_t seed, bool ood) {
  std::mt19937_64 g(seed);
  // The long-context MQAR filler comes from a stream of its own, so that every sequence's pairs and
  // queries are those of T = 3n + 1 whatever T is.
  std::mt19937_64 filler(batch_seed(seed, 0x46494C4C));
  Batch b;
  const int T = task.length();
  for (int s = 0; s < batch; ++s) {
    std::vector<int> tok(T), tgt(T, -1);
    if (task.task == "mqar") {
      const int n = task.pairs, lo = ood ? kOodKeyLo : kKeyLo, hi = ood ? kOodKeyHi : kKeyHi;
      std::vector<int> pool;
      for (int k = lo; k <= hi; ++k) pool.push_back(k);
      for (int i = 0; i < n; ++i) std::swap(pool[i], pool[draw(g, i, int(pool.size()) - 1)]);  // n distinct keys
      std::vector<int> val(n);
      for (int i = 0; i < n; ++i) {
        val[i] = draw(g, kValueLo, kValueHi);
        tok[2 * i] = pool[i];
        tok[2 * i + 1] = val[i];
      }
      const int gap = T - (3 * n + 1), sep = 2 * n + gap;  // the filler's length, the separator's position
      tok[sep] = kSeparator;
      std::vector<int> order(n);
      for (int i = 0; i < n; ++i) order[i] = i;
      for (int i = n - 1; i > 0; --i) std::swap(order[i], order[draw(g, 0, i)]);  // Fisher-Yates
      for (int i = 0; i < n; ++i) {
        tok[sep + 1 + i] = pool[order[i]];
        tgt[sep + 1 + i] = val[order[i]];
      }
      for (int j = 0; j < gap; ++j) tok[2 * n + j] = draw(filler, kValueLo, kValueHi);
    } else {
      const int m = T / 2;
      std::vector<int> x(m);
      for (int i = 0; i < m; ++i) x[i] = draw(g, 0, kSeparator - 1);
      for (int i = 0; i < m; ++i) tok[i] = x[i];
      tok[m] = kSeparator;
      for (int i = 1; i < m; ++i) tok[m + i] = x[i - 1];
      for (int i = 0; i < m; ++i) tgt[m + i] = x[i];
    }
    b.tokens.push_back(std::move(tok));
    b.targets.push_back(std::move(tgt));
  }
  return b;
}

}  // namespace vla::train
