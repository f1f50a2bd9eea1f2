#pragma once
// A flat byte encoding for what ranks send each other (core/parallel/group.hpp): unsigned and signed
// 64-bit integers and doubles by their bytes (so a double arrives bit for bit, NaN and infinity
// included), strings and double vectors length-prefixed. Ranks run the same binary on the same
// architecture (one `mpirun` of one build), so the host byte order is the wire order.
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace vla::parallel {

class ByteWriter {
 public:
  ByteWriter& u64(std::uint64_t x) { return raw(&x, sizeof x); }
  ByteWriter& i64(std::int64_t x) { return raw(&x, sizeof x); }
  ByteWriter& f64(double x) { return raw(&x, sizeof x); }
  ByteWriter& str(const std::string& s) {
    u64(s.size());
    return raw(s.data(), s.size());
  }
  ByteWriter& f64s(const std::vector<double>& v) {
    u64(v.size());
    return raw(v.data(), v.size() * sizeof(double));
  }
  const std::string& bytes() const { return b_; }
  std::string take() { return std::move(b_); }

 private:
  ByteWriter& raw(const void* p, std::size_t n) {
    b_.append(static_cast<const char*>(p), n);
    return *this;
  }
  std::string b_;
};

// Reads what a ByteWriter wrote, in the same order; a short or overlong message throws std::runtime_error
// (a message from another build or a bug, never silently misread).
class ByteReader {
 public:
  explicit ByteReader(const std::string& b) : b_(b) {}
  explicit ByteReader(std::string&&) = delete;  // it reads the string in place: never a temporary
  std::uint64_t u64() { return pod<std::uint64_t>(); }
  std::int64_t i64() { return pod<std::int64_t>(); }
  double f64() { return pod<double>(); }
  std::string str() {
    const std::uint64_t n = u64();
    need(n);
    std::string s = b_.substr(at_, n);
    at_ += n;
    return s;
  }
  std::vector<double> f64s() {
    const std::uint64_t n = u64();
    if (n > (b_.size() - at_) / sizeof(double)) throw std::runtime_error("parallel: message too short for its vector");
    std::vector<double> v(n);
    std::memcpy(v.data(), b_.data() + at_, n * sizeof(double));
    at_ += n * sizeof(double);
    return v;
  }
  // Call after the last field: a message longer than what was read is as wrong as a short one.
  void end() const {
    if (at_ != b_.size()) throw std::runtime_error("parallel: message longer than its fields");
  }

 private:
  template <class T>
  T pod() {
    need(sizeof(T));
    T x;
    std::memcpy(&x, b_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return x;
  }
  void need(std::uint64_t n) const {
    if (n > b_.size() - at_) throw std::runtime_error("parallel: message too short for its fields");
  }
  const std::string& b_;
  std::size_t at_ = 0;
};

}  // namespace vla::parallel
