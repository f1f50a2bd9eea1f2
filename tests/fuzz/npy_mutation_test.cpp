// The .npy reader under a deterministic mutation attack: valid float32/float64, 1-D/2-D, format 1.0
// and 2.0 files, mutated byte by byte and field by field, must each be decoded to exactly what they
// declare or refused with a clear error (tests/fuzz/harness.hpp); never another exception, a crash,
// an allocation beyond what the file holds, or a hang. `make fuzz` runs the same check
// (tests/fuzz/npy_target.hpp) under libFuzzer for longer.
#include "tests/fuzz/campaign.hpp"
#include "tests/fuzz/mutate.hpp"
#include "tests/fuzz/npy_files.hpp"
#include "tests/fuzz/npy_target.hpp"

#include "core/io/npy.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <array>
#include <chrono>
#include <iostream>
#include <vector>

using namespace vla;

namespace {

// Valid files: every dtype and rank the reader supports, empty arrays included, in both versions.
std::vector<std::string> valid_files() {
  std::vector<std::string> v1;
  for (const auto dtype : {io::NpyDtype::Float32, io::NpyDtype::Float64}) {
    for (const auto& [r, c] : std::vector<std::pair<int, int>>{{2, 3}, {1, 1}, {0, 3}, {4, 0}, {5, 2}}) {
      Mat<double> m(r, c);
      for (int i = 0; i < m.size(); ++i) m.data()[i] = 0.37 * i - 1.0 / 3.0;
      v1.push_back(io::encode_npy(m, 2, dtype));
    }
    for (const int n : {0, 1, 7}) v1.push_back(io::encode_npy(Mat<double>::Constant(n, 1, -2.5), 1, dtype));
  }
  std::vector<std::string> all = v1;
  for (const auto& f : v1) {  // the same header and data in a 2.0 frame (uint32 header length)
    const std::size_t len = std::size_t(static_cast<unsigned char>(f[8])) | std::size_t(static_cast<unsigned char>(f[9])) << 8;
    all.push_back(fuzz::npy_frame(f.substr(10, len), 2) + f.substr(10 + len));
  }
  return all;
}

template <std::size_t N> const char* pick(fuzz::Mutator& m, const std::array<const char*, N>& a) { return a[m.below(N)]; }

// A header assembled from hostile values of each field: dtypes the reader must refuse, fortran_order
// spelled wrong, shapes with huge, overflowing, negative or malformed dimensions; keys missing,
// repeated, unknown or reordered; the data section exactly as the shape declares (when small), one
// value short or long, or empty.
std::string edited_header_file(fuzz::Mutator& m) {
  static constexpr std::array<const char*, 14> descr{"'<f8'", "'<f4'", "'<f8'", "'<f4'", "'>f8'", "'<i8'", "'|u1'", "'<f2'",
                                                     "''", "'<f8 '", "\"<f4\"", "3", "'\x1b\xff\x80'", "[('a', '<f8')]"};
  static constexpr std::array<const char*, 7> fortran{"False", "False", "True", "0", "'False'", "Fals", "None"};
  static constexpr std::array<const char*, 16> dim{"0", "1", "2", "3", "7", "2147483647", "2147483648", "1099511627776",
                                                   "1099511627777", "18446744073709551617", "1824726041", "1263665316",
                                                   "4294967296", "-1", "3L", "0x10"};
  // Draws are sequenced one per statement: the order of a call's arguments is unspecified, and the
  // inputs must be the same with every compiler.
  const std::string d0 = pick(m, dim), d1 = pick(m, dim), d2 = pick(m, dim);
  std::string shape;
  switch (m.below(5)) {
    case 0: shape = "()"; break;
    case 1: shape = fmt::format("({},)", d0); break;
    case 2: shape = fmt::format("({}, {}, {})", d0, d1, d2); break;
    case 3: shape = "(1824726041, 1263665316)"; break;  // rows * cols * 8 = 2^64 + 32
    default: shape = fmt::format("({}, {})", d0, d1); break;
  }
  const std::string dtype = pick(m, descr);
  std::vector<std::string> fields{fmt::format("'descr': {}", dtype),
                                  fmt::format("'fortran_order': {}", pick(m, fortran)), fmt::format("'shape': {}", shape)};
  const auto edit = m.below(6), i = m.below(3), j = m.below(3);
  switch (edit) {
    case 0: fields.erase(fields.begin() + long(i)); break;  // a key missing
    case 1: fields.push_back(std::string(fields[i])); break;  // a key twice
    case 2: fields.push_back("'extra': 1"); break;           // an unknown key
    case 3: std::swap(fields[i], fields[j]); break;          // another order
    default: break;
  }
  std::string dict = "{";
  for (const auto& f : fields) dict += f + ", ";
  if (m.below(4) == 0) dict.resize(dict.size() - 2);  // no trailing comma
  dict += "}";

  // Data: the declared size when it is small, else something small; then maybe off by one value.
  long long rows = 0, cols = 1;
  const bool two_d = std::sscanf(shape.c_str(), "(%lld, %lld)", &rows, &cols) == 2;
  if (!two_d && std::sscanf(shape.c_str(), "(%lld,)", &rows) != 1) rows = 0;
  const long long itemsize = dtype.find("f4") != std::string::npos ? 4 : 8;
  long long bytes = rows >= 0 && cols >= 0 && rows <= 4096 && cols <= 4096 && rows * cols <= 512 ? rows * cols * itemsize
                                                                                                   : long(m.below(256));
  switch (m.below(4)) {
    case 0: bytes += itemsize; break;
    case 1: bytes = bytes >= itemsize ? bytes - itemsize : 0; break;
    default: break;
  }
  return fuzz::npy_file(dict, std::size_t(bytes), m.below(2) ? 1 : 2);
}

// A valid file whose header length field says something else (0, one off, the maximum, random).
std::string edited_length_file(fuzz::Mutator& m, std::string f) {
  const std::size_t width = f[6] == 2 ? 4 : 2;
  std::uint64_t len = 0;
  for (std::size_t i = 0; i < width; ++i) len |= std::uint64_t(static_cast<unsigned char>(f[8 + i])) << (8 * i);
  const std::uint64_t max = width == 4 ? 0xffffffffULL : 0xffffULL;
  const std::array<std::uint64_t, 6> choices{0, len - 1, len + 1, max, m.next() & max, len + f.size()};
  const std::uint64_t v = choices[m.below(choices.size())] & max;
  for (std::size_t i = 0; i < width; ++i) f[8 + i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return f;
}

}  // namespace

TEST_CASE("npy reader under 40,000 deterministic mutations: decoded exactly or refused clearly", "[io][fuzz]") {
  // If this fails, some malformed .npy makes `vla layer-forward --input` crash, allocate what the file
  // cannot hold, decode values the file does not declare, or print an unclear or raw-byte error.
  // The first findings are printed with their input (escaped), each reproducible from the fixed seed.
  const auto bases = valid_files();
  for (const auto& f : bases) REQUIRE(fuzz::check_npy(f).accepted);

  fuzz::Mutator m(0x5eed'2024'0016ULL);
  std::array<fuzz::Phase, 4> phases{{{"byte mutations of valid files", 24000},
                                     {"header field edits", 12000},
                                     {"header field edits, then byte mutations", 3000},
                                     {"header length field edits", 1000}}};
  const auto r = fuzz::run_campaign(phases, [&](std::size_t p) {
    const std::string& base = bases[m.below(bases.size())];
    switch (p) {
      case 0: return m.mutate(base);
      case 1: return edited_header_file(m);
      case 2: return m.mutate(edited_header_file(m), 2);
      default: return edited_length_file(m, base);
    }
  }, [](const std::string& input) { return fuzz::check_npy(input); });
  CHECK(r.total == 40000);
  INFO(r.first_findings);
  CHECK(r.findings == 0);
  // A hang would show as one input taking seconds; each input is at most a few kB and is decoded in
  // microseconds, so one second is a bound no loaded machine reaches.
  CHECK(r.slowest < 1.0);
}

TEST_CASE("npy: a zero-size array with a huge dimension decodes at once, as no elements", "[io][fuzz]") {
  // libFuzzer's `make fuzz` found this input hanging the checker: shape (921474836, 0) declares no
  // element. If this fails, the reader (or what checks it) walks a dimension instead of the elements,
  // and such a header costs seconds or more.
  for (const char* shape : {"(921474836, 0)", "(0, 2147483647)", "(2147483647, 0)"}) {
    std::string h = fmt::format("{{'descr': '<f8', 'fortran_order': False, 'shape': {}, }}", shape);
    h.append(117 - h.size(), ' ');  // 10 + 118 = 128 bytes before the data, as numpy aligns them
    const std::string f = std::string("\x93NUMPY\x01\x00", 8) + char(h.size() + 1) + '\0' + h + '\n';
    INFO(io::escape_bytes(f, 1024));
    const auto t0 = std::chrono::steady_clock::now();
    const auto v = fuzz::check_npy(f);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(v.accepted);
    CHECK(v.finding.empty());
    CHECK(s < 1.0);
  }
}
