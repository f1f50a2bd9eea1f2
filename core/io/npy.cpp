// NumPy .npy reading and writing; format described at numpy.org/doc/stable/reference/generated/numpy.lib.format.html:
//   magic "\x93NUMPY", major, minor (1 byte each), header length (uint16 LE for 1.0, uint32 LE for 2.0),
//   an ASCII Python dict literal {'descr': '<f8', 'fortran_order': False, 'shape': (r, c), } padded
//   with spaces and ending in '\n' so that the data starts at a multiple of 64 bytes, then the data.
#include "core/io/npy.hpp"

#include "core/io/atomic_file.hpp"
#include "core/io/escape.hpp"

#include <fmt/format.h>

#include <bit>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace vla::io {

static_assert(std::endian::native == std::endian::little, "the .npy reader assumes a little-endian host");

namespace {

// A tiny parser for the header's dict literal: string keys; values are strings, True/False, or
// tuples of non-negative integers. Anything else is a malformed header.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& source) : s_(text), src_(source) {}

  struct Value {
    enum Kind { String, Bool, Tuple } kind;
    std::string str;
    bool b = false;
    std::vector<long long> tuple;
  };

  std::vector<std::pair<std::string, Value>> parse_dict() {
    std::vector<std::pair<std::string, Value>> out;
    skip_ws();
    expect('{');
    for (;;) {
      skip_ws();
      if (peek() == '}') { ++i_; break; }
      std::string key = parse_string();
      skip_ws();
      expect(':');
      skip_ws();
      out.emplace_back(std::move(key), parse_value());
      skip_ws();
      if (peek() == ',') { ++i_; continue; }
      skip_ws();
      expect('}');
      break;
    }
    skip_ws();
    if (i_ != s_.size()) fail("trailing characters after the header dict");
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw std::invalid_argument(fmt::format("{}: malformed .npy header ({}) in \"{}\"", src_, why, escape_bytes(s_)));
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_ws() { while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_; }
  void expect(char c) {
    if (peek() != c) fail(fmt::format("expected '{}' at position {}", c, i_));
    ++i_;
  }
  std::string parse_string() {
    const char q = peek();
    if (q != '\'' && q != '"') fail(fmt::format("expected a quoted string at position {}", i_));
    ++i_;
    const auto end = s_.find(q, i_);
    if (end == std::string::npos) fail("unterminated string");
    std::string r = s_.substr(i_, end - i_);
    i_ = end + 1;
    return r;
  }
  Value parse_value() {
    Value v{Value::String, {}, false, {}};
    const char c = peek();
    if (c == '\'' || c == '"') { v.str = parse_string(); return v; }
    if (s_.compare(i_, 4, "True") == 0) { i_ += 4; v.kind = Value::Bool; v.b = true; return v; }
    if (s_.compare(i_, 5, "False") == 0) { i_ += 5; v.kind = Value::Bool; v.b = false; return v; }
    if (c == '(') {
      ++i_;
      v.kind = Value::Tuple;
      for (;;) {
        skip_ws();
        if (peek() == ')') { ++i_; break; }
        if (!std::isdigit(static_cast<unsigned char>(peek()))) fail(fmt::format("expected a dimension at position {}", i_));
        long long n = 0;
        while (std::isdigit(static_cast<unsigned char>(peek()))) {
          n = n * 10 + (s_[i_++] - '0');
          if (n > (1LL << 40)) fail("dimension too large");
        }
        if (peek() == 'L') ++i_;  // Python 2 long suffix, written by old NumPy
        v.tuple.push_back(n);
        skip_ws();
        if (peek() == ',') { ++i_; continue; }
        skip_ws();
        expect(')');
        break;
      }
      return v;
    }
    fail(fmt::format("unexpected value at position {}", i_));
  }

  const std::string& s_;
  const std::string& src_;
  std::size_t i_ = 0;
};

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLen = 6;

}  // namespace

NpyArray decode_npy(const std::string& bytes, const std::string& source) {
  auto fail = [&](const std::string& why) -> void {
    throw std::invalid_argument(fmt::format("{}: {}", source, why));
  };
  if (bytes.size() < kMagicLen + 2 || std::memcmp(bytes.data(), kMagic, kMagicLen) != 0)
    fail("not a .npy file (missing the \\x93NUMPY magic string)");
  const int major = static_cast<unsigned char>(bytes[6]);
  const int minor = static_cast<unsigned char>(bytes[7]);
  std::size_t header_len = 0, header_start = 0;
  if (major == 1) {
    if (bytes.size() < 10) fail("truncated .npy header");
    header_len = std::size_t(static_cast<unsigned char>(bytes[8])) | (std::size_t(static_cast<unsigned char>(bytes[9])) << 8);
    header_start = 10;
  } else if (major == 2) {
    if (bytes.size() < 12) fail("truncated .npy header");
    for (int i = 0; i < 4; ++i) header_len |= std::size_t(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    header_start = 12;
  } else {
    fail(fmt::format("unsupported .npy format version {}.{} (supported: 1.0, 2.0)", major, minor));
  }
  if (minor != 0) fail(fmt::format("unsupported .npy format version {}.{} (supported: 1.0, 2.0)", major, minor));
  if (bytes.size() < header_start + header_len) fail("truncated .npy header");
  const std::string header = bytes.substr(header_start, header_len);

  std::optional<std::string> descr;
  std::optional<bool> fortran;
  std::optional<std::vector<long long>> shape;
  for (auto& [key, v] : HeaderParser(header, source).parse_dict()) {
    if (key == "descr") {
      if (v.kind != HeaderParser::Value::String) fail("malformed .npy header ('descr' is not a string)");
      descr = v.str;
    } else if (key == "fortran_order") {
      if (v.kind != HeaderParser::Value::Bool) fail("malformed .npy header ('fortran_order' is not True/False)");
      fortran = v.b;
    } else if (key == "shape") {
      if (v.kind != HeaderParser::Value::Tuple) fail("malformed .npy header ('shape' is not a tuple)");
      shape = v.tuple;
    } else {
      fail(fmt::format("malformed .npy header (unknown key '{}')", escape_bytes(key)));
    }
  }
  if (!descr || !fortran || !shape) fail("malformed .npy header (needs 'descr', 'fortran_order' and 'shape')");

  NpyArray a;
  std::size_t itemsize = 0;
  if (*descr == "<f8") { a.dtype = NpyDtype::Float64; itemsize = 8; }
  else if (*descr == "<f4") { a.dtype = NpyDtype::Float32; itemsize = 4; }
  else fail(fmt::format("unsupported dtype '{}' (allowed: '<f4' float32, '<f8' float64, little-endian)", escape_bytes(*descr)));
  if (*fortran) fail("fortran_order is True (only C-order arrays are supported; use numpy.ascontiguousarray)");
  if (shape->size() != 1 && shape->size() != 2)
    fail(fmt::format("array has {} dimensions (allowed: 1 or 2)", shape->size()));
  a.ndim = static_cast<int>(shape->size());
  const long long rows = (*shape)[0];
  const long long cols = a.ndim == 2 ? (*shape)[1] : 1;
  if (rows > std::numeric_limits<int>::max() || cols > std::numeric_limits<int>::max())
    fail("array too large");
  const std::size_t data_start = header_start + header_len;
  const std::size_t have = bytes.size() - data_start;
  // rows * cols * itemsize can exceed size_t (two dimensions near 2^31): a wrapped product could
  // match a small file and lead to a huge allocation, so an overflowing shape is refused first.
  std::size_t n = 0, n_bytes = 0;
  if (__builtin_mul_overflow(std::size_t(rows), std::size_t(cols), &n) || __builtin_mul_overflow(n, itemsize, &n_bytes))
    fail(fmt::format("truncated data: the header's shape ({}, {}) promises more than 2^64 bytes, the file holds {} bytes",
                     rows, cols, have));
  if (have < n_bytes)
    fail(fmt::format("truncated data: the header promises {} values ({} bytes), the file holds {} bytes", n, n_bytes, have));
  if (have > n_bytes)
    fail(fmt::format("{} trailing bytes after the {} values the header promises", have - n_bytes, n));

  a.data.resize(rows, cols);
  const char* p = bytes.data() + data_start;
  // C order: element (i, j) is at i * cols + j. One pass over the n elements, not over a dimension: a
  // (2^31 - 1, 0) array holds nothing and must cost nothing.
  for (std::size_t k = 0; k < n; ++k) {
    const long long i = static_cast<long long>(k / std::size_t(cols)), j = static_cast<long long>(k % std::size_t(cols));
    const char* e = p + k * itemsize;
    if (itemsize == 8) {
      double x;
      std::memcpy(&x, e, 8);
      a.data(i, j) = x;
    } else {
      float x;
      std::memcpy(&x, e, 4);
      a.data(i, j) = x;
    }
  }
  return a;
}

NpyArray read_npy(const std::filesystem::path& path, const std::string& what) {
  const std::string source = fmt::format("{}: '{}'", what, escape_bytes(path.string(), 4096));
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw std::invalid_argument(fmt::format("{}: file not found (or not a regular file)", source));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(fmt::format("{}: cannot open for reading", source));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::invalid_argument(fmt::format("{}: read error", source));
  return decode_npy(bytes, source);
}

Mat<double> read_npy_matrix(const std::filesystem::path& path, const std::string& what, bool one_d_as_row) {
  NpyArray a = read_npy(path, what);
  if (a.ndim == 1 && one_d_as_row) return a.data.transpose();
  return a.data;
}

std::string encode_npy(const Mat<double>& data, int ndim, NpyDtype dtype) {
  if (ndim != 1 && ndim != 2) throw std::invalid_argument(fmt::format("npy: ndim must be 1 or 2, got {}", ndim));
  if (ndim == 1 && data.cols() != 1 && data.rows() != 1)
    throw std::invalid_argument(fmt::format("npy: a 1-D array needs a single row or column, got ({}, {})", data.rows(), data.cols()));
  const std::string shape = ndim == 1 ? fmt::format("({},)", data.size()) : fmt::format("({}, {})", data.rows(), data.cols());
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
                                   dtype == NpyDtype::Float64 ? "<f8" : "<f4", shape);
  // Pad with spaces so that magic(6) + version(2) + length(2) + header + '\n' is a multiple of 64.
  const std::size_t unpadded = kMagicLen + 2 + 2 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  if (header.size() > 65535) throw std::invalid_argument("npy: header too long for format 1.0");
  std::string out(kMagic, kMagicLen);
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>((header.size() >> 8) & 0xff));
  out += header;
  const std::size_t itemsize = dtype == NpyDtype::Float64 ? 8 : 4;
  const std::size_t start = out.size();
  out.resize(start + std::size_t(data.size()) * itemsize);
  char* p = out.data() + start;
  // 1-D: elements in storage order of the single row/column; 2-D: C (row-major) order.
  for (std::size_t idx = 0; idx < std::size_t(data.size()); ++idx) {
    const Eigen::Index i = Eigen::Index(idx / std::size_t(data.cols())), j = Eigen::Index(idx % std::size_t(data.cols()));
    if (itemsize == 8) {
      const double x = data(i, j);
      std::memcpy(p + idx * 8, &x, 8);
    } else {
      const float x = static_cast<float>(data(i, j));
      std::memcpy(p + idx * 4, &x, 4);
    }
  }
  return out;
}

void write_npy(const std::filesystem::path& path, const Mat<double>& data, int ndim, NpyDtype dtype) {
  const std::string bytes = encode_npy(data, ndim, dtype);
  write_atomically(path, [&](std::ostream& o) { o.write(bytes.data(), static_cast<std::streamsize>(bytes.size())); },
                   std::ios::out | std::ios::binary);
}

}  // namespace vla::io
