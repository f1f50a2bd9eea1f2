#pragma once
// A deterministic mutation campaign over one reader: phases of inputs, each input made by
// make(phase index) (from a seeded fuzz::Mutator, so every input is reproducible) and judged by
// check(bytes) -> fuzz::Verdict (harness.hpp). Prints one line per phase (inputs, accepted, refused)
// and a total; the test asserts on the result.
#include "tests/fuzz/harness.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <span>
#include <string>

namespace vla::fuzz {

struct Phase {
  const char* name;
  int inputs;
  int accepted = 0;
};

struct CampaignResult {
  int total = 0;
  int findings = 0;
  std::string first_findings;  // the first 10, each with its input (escaped)
  double slowest = 0;          // seconds, the slowest single input
};

template <class Make, class Check> CampaignResult run_campaign(std::span<Phase> phases, Make&& make, Check&& check) {
  CampaignResult r;
  for (std::size_t p = 0; p < phases.size(); ++p)
    for (int i = 0; i < phases[p].inputs; ++i) {
      const std::string input = make(p);
      const auto start = std::chrono::steady_clock::now();
      const Verdict v = check(input);
      r.slowest = std::max(r.slowest, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      phases[p].accepted += v.accepted;
      if (!v.finding.empty() && ++r.findings <= 10)
        r.first_findings += fmt::format("{} #{}: {}\n  input: {}\n", phases[p].name, i, v.finding, io::escape_bytes(input, 1024));
    }
  for (const auto& ph : phases) {
    std::cout << fmt::format("  {:>6} {} ({} accepted, {} refused)\n", ph.inputs, ph.name, ph.accepted, ph.inputs - ph.accepted);
    r.total += ph.inputs;
  }
  std::cout << fmt::format("  {} inputs, {} findings, slowest input {:.3g} s\n", r.total, r.findings, r.slowest);
  return r;
}

}  // namespace vla::fuzz
