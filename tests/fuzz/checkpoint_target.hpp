#pragma once
// The checkpoint reader under attack (core/train/checkpoint.hpp decode_checkpoint), in the harness
// shape of tests/fuzz/harness.hpp: used by the mutation test (tests/fuzz/checkpoint_mutation_test.cpp)
// and the libFuzzer target (tests/fuzz/libfuzzer/checkpoint_fuzzer.cpp).
#include "tests/fuzz/harness.hpp"

#include <string_view>

namespace vla::fuzz {

// The parameter name the reader is given; every refusal must contain it.
inline constexpr std::string_view kCheckpointParameter = "--resume";

// Decodes `bytes` as checkpoint.bin. Accepted: the checkpoint must be what the bytes hold, checked
// against the file's frame parsed here, independently of the reader: format 2's checksum is the
// CRC-32 of the rest; encoding the result again gives the input's bytes after the config JSON (step,
// counters, log, tensors); the config JSON re-encoded holds every key of the input with the same
// value (and keys the input lacks only for knobs, which default); every parameter and moment is
// finite and every second moment >= 0.
Verdict check_checkpoint(std::string_view bytes);

}  // namespace vla::fuzz
