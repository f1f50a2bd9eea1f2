#pragma once
// .npy files built byte by byte for the tests that attack the reader: a header dict of the test's
// choosing (valid or not) in a format 1.0 or 2.0 frame, with any number of data bytes.
#include <cstddef>
#include <string>

namespace vla::fuzz {

// The frame around a header: magic, version (major.0), the header length field (uint16 LE for 1.0,
// uint32 LE for 2.0), then `header` exactly as given.
inline std::string npy_frame(const std::string& header, int major = 1) {
  std::string out("\x93NUMPY", 6);
  out.push_back(char(major));
  out.push_back('\0');
  const std::size_t len_bytes = major == 2 ? 4 : 2;
  for (std::size_t i = 0; i < len_bytes; ++i) out.push_back(char((header.size() >> (8 * i)) & 0xff));
  return out + header;
}

// A complete file: `dict` padded with spaces and ended by '\n' so that the data starts at a multiple
// of 64 bytes (as NumPy writes it), followed by `data_bytes` zero bytes.
inline std::string npy_file(const std::string& dict, std::size_t data_bytes, int major = 1) {
  const std::size_t prefix = major == 2 ? 12 : 10;
  std::string h = dict;
  while ((prefix + h.size() + 1) % 64) h.push_back(' ');
  h.push_back('\n');
  return npy_frame(h, major) + std::string(data_bytes, '\0');
}

}  // namespace vla::fuzz
