#pragma once
// CRC-32 (the IEEE 802.3 / zlib / PNG checksum: reflected polynomial 0xEDB88320, initial value and
// final XOR 0xFFFFFFFF), the integrity check of the toolkit's binary files (checkpoint.bin). Why this
// one: it detects every error burst of up to 32 bits and every 1- or 2-bit error in files up to
// 512 MiB (Koopman's tables: Hamming distance 3 up to 2^32 bits), misses a random corruption with
// probability 2^-32, and anyone can recompute it (Python: zlib.crc32(data)).
#include <array>
#include <cstdint>
#include <string_view>

namespace vla::io {

namespace detail {
constexpr std::array<std::uint32_t, 256> crc32_table() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}
inline constexpr std::array<std::uint32_t, 256> kCrc32Table = crc32_table();
}  // namespace detail

// The CRC-32 of `bytes`; crc32("123456789") = 0xCBF43926 (the standard check value).
inline std::uint32_t crc32(std::string_view bytes) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (const char ch : bytes) c = detail::kCrc32Table[(c ^ static_cast<unsigned char>(ch)) & 0xffu] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

}  // namespace vla::io
