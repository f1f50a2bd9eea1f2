#pragma once
// NumPy .npy files (format versions 1.0 and 2.0), the toolkit's interchange with researchers' code.
//
// Supported: dtype '<f4' (float32) and '<f8' (float64), C order (fortran_order False), 1-D and 2-D
// shapes. Everything else is rejected with std::invalid_argument naming the file and what is wrong:
// big-endian or other dtypes, fortran_order True, 0-D or >2-D shapes, a malformed header, or a data
// section shorter (or longer) than the header promises.
//
// In memory an array is an Eigen matrix of double: a 2-D array (r, c) is Mat<double>(r, c); a 1-D
// array (n) is read as Mat<double>(n, 1) with NpyArray::ndim == 1 recording that it was 1-D, so a
// round trip keeps the shape. float32 data is widened to double exactly.
// Files are written through io::write_atomically (whole or not at all).
#include "core/scalar.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace vla::io {

enum class NpyDtype { Float32, Float64 };

struct NpyArray {
  int ndim = 2;          // 1 or 2
  NpyDtype dtype = NpyDtype::Float64;
  Mat<double> data;      // (rows, cols); a 1-D array of length n is (n, 1)
};

// Reads a .npy file. `what` names the parameter in error messages (e.g. "--input"); errors read
// "<what>: <file>: <problem>".
NpyArray read_npy(const std::filesystem::path& path, const std::string& what = "npy");

// Reads a 2-D array (or a 1-D one as a single row when `one_d_as_row`, a single column otherwise).
Mat<double> read_npy_matrix(const std::filesystem::path& path, const std::string& what = "npy",
                            bool one_d_as_row = true);

// Serialises to .npy bytes (version 1.0 header, padded to a multiple of 64 bytes as NumPy does).
// ndim = 1 requires data.cols() == 1 (or rows() == 1).
std::string encode_npy(const Mat<double>& data, int ndim = 2, NpyDtype dtype = NpyDtype::Float64);

// Writes atomically (temp file + rename).
void write_npy(const std::filesystem::path& path, const Mat<double>& data, int ndim = 2,
               NpyDtype dtype = NpyDtype::Float64);

// Parses .npy bytes already in memory (used by read_npy and by tests). `source` names the origin.
NpyArray decode_npy(const std::string& bytes, const std::string& source);

}  // namespace vla::io
