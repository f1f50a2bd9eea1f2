// libFuzzer target for the checkpoint reader: every input must be decoded to exactly what it holds or
// refused with a clear error naming --resume (tests/fuzz/checkpoint_target.hpp); a finding aborts so
// that libFuzzer keeps the input. Built and run by `make fuzz` (clang only).
#include "tests/fuzz/checkpoint_target.hpp"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  vla::fuzz::abort_on_finding(vla::fuzz::check_checkpoint(input), input);
  return 0;
}
