#pragma once
// Byte-level mutations for the deterministic mutation tests: the moves a coverage-guided fuzzer makes
// most often, drawn from a fixed seed so that a ctest run is reproducible (mutation i of a run is the
// same on every machine: only std::mt19937_64, whose sequence the standard fixes, and modulo).
#include <cstdint>
#include <random>
#include <string>

namespace vla::fuzz {

class Mutator {
 public:
  explicit Mutator(std::uint64_t seed) : gen_(seed) {}

  std::uint64_t below(std::uint64_t n) { return n ? gen_() % n : 0; }
  std::uint64_t next() { return gen_(); }
  char byte() { return static_cast<char>(gen_() & 0xff); }

  // One of: flip a bit, set a byte to any value, truncate, extend with random bytes, insert random
  // bytes, erase a range, duplicate a range. Each adds at most 64 bytes, so inputs stay small.
  std::string mutate_once(std::string s) {
    switch (below(7)) {
      case 0:
        if (!s.empty()) s[below(s.size())] ^= static_cast<char>(1u << below(8));
        break;
      case 1:
        if (!s.empty()) s[below(s.size())] = byte();
        break;
      case 2:
        s.resize(below(s.size() + 1));
        break;
      case 3:
        for (auto n = 1 + below(64); n; --n) s.push_back(byte());
        break;
      case 4: {
        const auto at = below(s.size() + 1);
        std::string ins;
        for (auto n = 1 + below(16); n; --n) ins.push_back(byte());
        s.insert(at, ins);
        break;
      }
      case 5:
        if (!s.empty()) {
          const auto at = below(s.size());
          s.erase(at, 1 + below(16));
        }
        break;
      default:
        if (!s.empty()) {
          const auto at = below(s.size());
          const auto len = 1 + below(16);
          s.insert(below(s.size() + 1), s.substr(at, len));
        }
        break;
    }
    return s;
  }

  // 1 to `max_rounds` mutations in a row.
  std::string mutate(std::string s, int max_rounds = 4) {
    for (auto n = 1 + below(std::uint64_t(max_rounds)); n; --n) s = mutate_once(std::move(s));
    return s;
  }

 private:
  std::mt19937_64 gen_;
};

}  // namespace vla::fuzz
