// core/io/escape: file bytes quoted in messages are printable ASCII and readable back.
#include "core/io/escape.hpp"

#include <catch2/catch.hpp>

using namespace vla;

TEST_CASE("escape_bytes keeps printable ASCII and writes every other byte as \\xNN", "[io]") {
  // If this fails, an error message quoting a file could carry raw control or non-ASCII bytes.
  CHECK(io::escape_bytes("{'descr': '<f8'}") == "{'descr': '<f8'}");
  CHECK(io::escape_bytes(std::string("a\0b", 3)) == "a\\x00b");
  CHECK(io::escape_bytes("\n\t\x1b\x7f") == "\\x0a\\x09\\x1b\\x7f");
  CHECK(io::escape_bytes("\xc3\xa9 \xff\xfe") == "\\xc3\\xa9 \\xff\\xfe");  // valid or not, UTF-8 is escaped
  CHECK(io::escape_bytes("a\\x00") == "a\\\\x00");  // a literal backslash is doubled: unambiguous
  CHECK(io::escape_bytes(std::string(300, 'x'), 256) == std::string(256, 'x') + "... (44 more bytes)");
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(char(c));
  CHECK(io::is_printable_ascii(io::escape_bytes(all)));
  CHECK_FALSE(io::is_printable_ascii(all));
}
