#pragma once
// The .npy reader under attack (core/io/npy.hpp decode_npy), in the harness shape of
// tests/fuzz/harness.hpp: used by the mutation test (tests/fuzz/npy_mutation_test.cpp) and the
// libFuzzer target (tests/fuzz/libfuzzer/npy_fuzzer.cpp).
#include "tests/fuzz/harness.hpp"

#include <string_view>

namespace vla::fuzz {

// The parameter name the reader is given; every refusal must contain it.
inline constexpr std::string_view kNpyParameter = "--input";

// Decodes `bytes` as a .npy file. Accepted: the matrix must be what the bytes declare, checked
// independently of the reader's header parser: ndim 1 (one column) or 2, the data section (after
// the header length field's header) exactly rows * cols * itemsize bytes, and every element equal
// bit for bit to its value in the file (float32 widened to double).
Verdict check_npy(std::string_view bytes);

}  // namespace vla::fuzz
