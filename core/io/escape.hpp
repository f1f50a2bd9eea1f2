#pragma once
// Bytes read from a file, quoted for an error message. A malformed file can hold anything (control
// characters, escape sequences, invalid UTF-8); a message that echoed them raw would write them to
// the user's terminal. Every reader that quotes file content in a message quotes it through here.
#include <fmt/format.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace vla::io {

// Printable ASCII (0x20..0x7e) is kept as is, except the backslash, which is doubled so that the
// quoting can be read back unambiguously; every other byte (control characters, DEL, and every byte
// >= 0x80, so invalid UTF-8 too) becomes \xNN. At most `max_bytes` input bytes are quoted; a longer
// input ends in "... (N more bytes)". The result is printable ASCII.
inline std::string escape_bytes(std::string_view bytes, std::size_t max_bytes = 256) {
  std::string out;
  const std::size_t n = bytes.size() < max_bytes ? bytes.size() : max_bytes;
  out.reserve(n + 16);
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c == '\\') out += "\\\\";
    else if (c >= 0x20 && c <= 0x7e) out.push_back(static_cast<char>(c));
    else out += fmt::format("\\x{:02x}", c);
  }
  if (n < bytes.size()) out += fmt::format("... ({} more bytes)", bytes.size() - n);
  return out;
}

// True when every byte of `text` is printable ASCII (0x20..0x7e): what escape_bytes produces, and
// what every error message must be.
inline bool is_printable_ascii(std::string_view text) {
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

}  // namespace vla::io
