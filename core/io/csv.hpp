#pragma once
// Minimal CSV writing: a header row, then rows of numbers printed with enough digits to round-trip a
// double (17 significant). NaN is written as "nan", which numpy.genfromtxt and gnuplot both read.
#include "core/io/atomic_file.hpp"

#include <fmt/format.h>

#include <cmath>
#include <string>
#include <vector>

namespace vla::io {

class CsvTable {
 public:
  explicit CsvTable(std::vector<std::string> header) : header_(std::move(header)) {}
  void add_row(const std::vector<double>& row) {
    if (row.size() != header_.size())
      throw std::logic_error(fmt::format("CSV row has {} fields, header has {}", row.size(), header_.size()));
    rows_.push_back(row);
  }
  const std::vector<std::string>& header() const { return header_; }
  const std::vector<std::vector<double>>& rows() const { return rows_; }

  void write(const std::filesystem::path& path) const {
    write_atomically(path, [&](std::ostream& o) {
      for (std::size_t i = 0; i < header_.size(); ++i) o << (i ? "," : "") << header_[i];
      o << '\n';
      for (const auto& r : rows_) {
        for (std::size_t i = 0; i < r.size(); ++i) o << (i ? "," : "") << format_number(r[i]);
        o << '\n';
      }
    });
  }

  static std::string format_number(double x) {
    if (std::isnan(x)) return "nan";
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
    if (x == std::floor(x) && std::abs(x) < 1e15) return fmt::format("{:.0f}", x);
    return fmt::format("{:.17g}", x);
  }

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<double>> rows_;
};

}  // namespace vla::io
