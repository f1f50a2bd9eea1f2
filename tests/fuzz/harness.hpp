#pragma once
// The contract every reader of untrusted bytes keeps (the .npy reader, the checkpoint reader): for any
// input it either ACCEPTS, returning a result that agrees with what the input declares, or REFUSES,
// throwing std::invalid_argument whose message names the parameter the bytes came from and is
// printable ASCII. Anything else is a finding: another exception type (std::bad_alloc from a huge
// allocation, std::out_of_range, ...), a refusal that does not name the parameter, or raw bytes in
// the message. Crashes and hangs are findings too; the sanitizers and libFuzzer catch those.
//
// One harness shape for every reader, so that a deterministic mutation test (ctest) and a libFuzzer
// target drive the same check: bytes in, a Verdict out.
#include "core/io/escape.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>
#include <typeinfo>

namespace vla::fuzz {

struct Verdict {
  bool accepted = false;
  std::string refusal;  // the refusal's message (when not accepted)
  std::string finding;  // empty: the contract held; otherwise what broke it
};

// Runs `read()`, which parses the input and returns "" when what it decoded agrees with the input
// (or a description of the disagreement), and classifies the outcome. `parameter` is the name the
// reader was given for its input (e.g. "--input"); a refusal must contain it.
template <class Read> Verdict accept_or_refuse(std::string_view parameter, Read&& read) {
  Verdict v;
  try {
    v.finding = read();
    v.accepted = true;
  } catch (const std::invalid_argument& e) {
    v.refusal = e.what();
    if (v.refusal.find(parameter) == std::string::npos)
      v.finding = fmt::format("the refusal does not name '{}': {}", parameter, io::escape_bytes(v.refusal));
    else if (!io::is_printable_ascii(v.refusal))
      v.finding = fmt::format("the refusal is not printable ASCII: {}", io::escape_bytes(v.refusal));
  } catch (const std::exception& e) {
    v.finding = fmt::format("{} thrown instead of std::invalid_argument: {}", typeid(e).name(), io::escape_bytes(e.what()));
  } catch (...) {
    v.finding = "a non-standard exception was thrown";
  }
  return v;
}

// For libFuzzer targets: a finding is a crash, so that libFuzzer saves the input that caused it.
inline void abort_on_finding(const Verdict& v, std::string_view input) {
  if (v.finding.empty()) return;
  std::fprintf(stderr, "finding: %s\ninput (%zu bytes): %s\n", v.finding.c_str(), input.size(),
               io::escape_bytes(input, 4096).c_str());
  std::abort();
}

}  // namespace vla::fuzz
