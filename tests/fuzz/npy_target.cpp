#include "tests/fuzz/npy_target.hpp"

#include "core/io/npy.hpp"

#include <bit>
#include <cstdint>
#include <cstring>

namespace vla::fuzz {

namespace {

// Where the data starts, from the frame alone: 10 + uint16 header length (1.0) or 12 + uint32 (2.0).
std::size_t data_start(std::string_view b) {
  auto byte = [&](std::size_t i) { return std::size_t(static_cast<unsigned char>(b[i])); };
  if (b[6] == 1) return 10 + (byte(8) | byte(9) << 8);
  return 12 + (byte(8) | byte(9) << 8 | byte(10) << 16 | byte(11) << 24);
}

std::string agrees_with_input(const io::NpyArray& a, std::string_view bytes) {
  const Mat<double>& m = a.data;
  if (a.ndim != 1 && a.ndim != 2) return fmt::format("accepted with ndim {}", a.ndim);
  if (a.ndim == 1 && m.cols() != 1) return fmt::format("a 1-D array decoded with {} columns", m.cols());
  const std::size_t itemsize = a.dtype == io::NpyDtype::Float64 ? 8 : 4;
  const std::size_t start = data_start(bytes);
  if (start > bytes.size() || bytes.size() - start != std::size_t(m.size()) * itemsize)
    return fmt::format("accepted a ({}, {}) array of {}-byte values from a {}-byte data section", m.rows(), m.cols(),
                       itemsize, bytes.size() - start);
  const char* p = bytes.data() + start;
  // One pass over the elements in file (row-major) order: a (2^31 - 1, 0) array has no element and must
  // cost nothing here either.
  for (Eigen::Index n = 0; n < m.size(); ++n) {
    const Eigen::Index i = n / m.cols(), j = n % m.cols();
    const char* e = p + std::size_t(n) * itemsize;
    double want;
    if (itemsize == 8) {
      std::memcpy(&want, e, 8);
    } else {
      float f;
      std::memcpy(&f, e, 4);
      want = f;
    }
    if (std::bit_cast<std::uint64_t>(want) != std::bit_cast<std::uint64_t>(m(i, j)))
      return fmt::format("element ({}, {}) decoded as {}, the file holds {}", i, j, m(i, j), want);
  }
  return {};
}

}  // namespace

Verdict check_npy(std::string_view bytes) {
  const std::string source = fmt::format("{}: 'fuzz.npy'", kNpyParameter);
  return accept_or_refuse(kNpyParameter, [&] {
    const io::NpyArray a = io::decode_npy(std::string(bytes), source);
    return agrees_with_input(a, bytes);
  });
}

}  // namespace vla::fuzz
