#pragma once
// The runtime of the literate C++ notebooks (notebooks-cpp/README.md). A notebook is one program whose
// Markdown cells are comment lines starting "//md"; every other line is code. Where the source says
// NB_SHOW(); the rendering (nb_render) places what the program printed since the previous NB_SHOW():
// plain text as a text block, lines made by nb::markdown (tables, images) as Markdown.
//   NB_QUICK=1  the CI size (nb::quick()): seconds, numbers only show that the notebook runs
//   NB_DIR      where the notebook writes its plots and data (nb::dir(); nb_render sets it)
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

namespace nb {

inline bool quick() {
  const char* q = std::getenv("NB_QUICK");
  return q && std::string(q) == "1";
}

inline std::filesystem::path dir() {
  const char* d = std::getenv("NB_DIR");
  std::filesystem::path p = d ? d : ".";
  std::filesystem::create_directories(p);
  return p;
}

// The record separator marks the lines that are not plain output (nb_render's protocol).
inline constexpr char kMark = '\x1e';

// Markdown for the rendering (each line sent as one Markdown line).
inline void markdown(const std::string& md) {
  std::istringstream in(md);
  for (std::string line; std::getline(in, line);) std::printf("%cmd %s\n", kMark, line.c_str());
}

// An image written under dir(), shown with its caption.
inline void image(const std::filesystem::path& png, const std::string& caption) {
  markdown(fmt::format("![{}]({})\n\n*{}*", caption, png.filename().string(), caption));
}

inline void show() {
  std::fflush(stdout);
  std::printf("%cshow\n", kMark);
  std::fflush(stdout);
}

}  // namespace nb

#define NB_SHOW() nb::show()
