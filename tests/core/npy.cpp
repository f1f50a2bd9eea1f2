// core/io/npy: round trips and rejection of malformed files.
#include "core/io/npy.hpp"

#include "core/io/escape.hpp"
#include "tests/fuzz/npy_files.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <cstring>
#include <fstream>
#include <unistd.h>

using namespace vla;
namespace fs = std::filesystem;

namespace {

Mat<double> sample(long r, long c) {
  Mat<double> m(r, c);
  for (long i = 0; i < r; ++i)
    for (long j = 0; j < c; ++j) m(i, j) = 0.1 * double(i * c + j) - 1.0 / 3.0;  // distinct, not exact in f4
  return m;
}

fs::path scratch(const std::string& name) {
  return fs::temp_directory_path() / fmt::format("vla-npy-test-{}-{}", ::getpid(), name);
}

}  // namespace

TEST_CASE("npy round trip: f8 exact, f4 to float rounding, 1-D and 2-D", "[io]") {
  // If these fail, arrays exchanged with NumPy would change value or shape on the way.
  const Mat<double> m = sample(3, 5);
  const auto p = scratch("rt.npy");
  io::write_npy(p, m);
  const auto a = io::read_npy(p);
  CHECK(a.ndim == 2);
  CHECK(a.dtype == io::NpyDtype::Float64);
  CHECK(a.data == m);  // float64 is stored bit for bit: exact equality is the contract

  io::write_npy(p, m, 2, io::NpyDtype::Float32);
  const auto f = io::read_npy(p);
  CHECK(f.dtype == io::NpyDtype::Float32);
  // float32 storage rounds each value once (relative error <= u_f32 = 2^-24), and widening back is exact:
  // the read value must be exactly float(m).
  CHECK(f.data == m.unaryExpr([](double x) { return double(float(x)); }));

  const Mat<double> v = sample(7, 1);
  io::write_npy(p, v, 1);
  const auto b = io::read_npy(p);
  CHECK(b.ndim == 1);
  CHECK(b.data == v);
  CHECK(io::read_npy_matrix(p).rows() == 1);  // 1-D read as one row by default
  fs::remove(p);
}

TEST_CASE("npy: version 2.0 headers are read", "[io]") {
  // NumPy writes 2.0 headers for very wide dtypes; a reader that only knows 1.0 would reject them.
  std::string bytes = fuzz::npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 16, 2);
  const double x[2] = {1.5, -2.25};
  std::memcpy(bytes.data() + bytes.size() - 16, x, 16);
  const auto a = io::decode_npy(bytes, "v2");
  CHECK(a.ndim == 1);
  CHECK(a.data(0, 0) == 1.5);
  CHECK(a.data(1, 0) == -2.25);
}

TEST_CASE("npy: malformed files are rejected naming the file", "[io]") {
  // Each of these must be an error naming the source, not a crash and not silently wrong data.
  auto rejects = [](const std::string& bytes, const std::string& what) {
    INFO(what);
    try {
      io::decode_npy(bytes, "FILE.npy");
      FAIL("accepted");
    } catch (const std::invalid_argument& e) {
      const std::string msg = e.what();
      INFO(msg);
      CHECK(msg.find("FILE.npy") != std::string::npos);
      CHECK(msg.find(what) != std::string::npos);
    }
  };
  const std::string good = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }";
  CHECK_NOTHROW(io::decode_npy(fuzz::npy_file(good, 48), "ok"));
  rejects(fuzz::npy_file(good, 40), "truncated");
  rejects(fuzz::npy_file(good, 56), "trailing");
  rejects(fuzz::npy_file("{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }", 48), "dtype");
  rejects(fuzz::npy_file("{'descr': '>f8', 'fortran_order': False, 'shape': (2, 3), }", 48), "dtype");
  rejects(fuzz::npy_file("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }", 48), "fortran_order");
  rejects(fuzz::npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3, 1), }", 48), "dimensions");
  rejects(fuzz::npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3) ", 48), "malformed");
  rejects(fuzz::npy_file("garbage", 48), "malformed");
  rejects(fuzz::npy_file("{'descr': '<f8', 'shape': (2, 3), }", 48), "malformed");
  // 1824726041 * 1263665316 * 8 = 2^64 + 32: a reader multiplying in size_t sees a 32-byte array that
  // the file holds, then asks for 18 EB (std::bad_alloc, or a huge allocation) instead of refusing.
  rejects(fuzz::npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (1824726041, 1263665316), }", 32),
          "(1824726041, 1263665316)");
  rejects("not an npy file at all", "magic");
  rejects(std::string("\x93NUMPY\x01\x00\xff\x00{", 11), "truncated");
  rejects(std::string("\x93NUMPY\x03\x00\x00\x00", 10), "version");
}

TEST_CASE("npy: a missing file is an error naming the parameter and the path", "[io]") {
  // If this fails, `vla layer-forward` would report a missing parameter file unclearly.
  try {
    io::read_npy("/nonexistent/dir/W.npy", "--params");
    FAIL("accepted");
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    CHECK(msg.find("--params") != std::string::npos);
    CHECK(msg.find("/nonexistent/dir/W.npy") != std::string::npos);
  }
}

TEST_CASE("npy: header bytes quoted in an error are escaped, and the error names the parameter", "[io]") {
  // A malformed file can hold terminal escape sequences, control characters and invalid UTF-8; if
  // this fails, `vla layer-forward --input` would write them raw to the user's terminal.
  static constexpr char kHostile[] = "\x1b[31m\x07\r\x00\x7f\xff\xfe\xc3\x80\x80\\";
  const std::string hostile(kHostile, sizeof kHostile - 1);  // with its NUL byte
  const std::string escaped = "\\x1b[31m\\x07\\x0d\\x00\\x7f\\xff\\xfe\\xc3\\x80\\x80\\\\";
  const std::vector<std::string> dicts{
      "{'descr': '" + hostile + "', 'fortran_order': False, 'shape': (2, 3), }",  // the dtype is quoted
      "{'" + hostile + "': '<f8', 'fortran_order': False, 'shape': (2, 3), }",     // an unknown key
      "{'descr': '<f8', " + hostile + "}",                                         // the whole header
  };
  const auto p = scratch("hostile.npy");
  for (const auto& dict : dicts) {
    std::ofstream(p, std::ios::binary) << fuzz::npy_file(dict, 48);
    try {
      io::read_npy(p, "--input");
      FAIL("accepted");
    } catch (const std::invalid_argument& e) {
      const std::string msg = e.what();
      INFO(io::escape_bytes(msg));
      CHECK(io::is_printable_ascii(msg));
      CHECK(msg.find("--input") != std::string::npos);
      CHECK(msg.find(escaped) != std::string::npos);  // the bytes are still shown, escaped
    }
  }
  fs::remove(p);
}
