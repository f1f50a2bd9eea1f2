#pragma once
// Results are written whole or not at all: write to "<path>.tmp.<pid>" in the same directory, flush,
// then rename over the target (rename is atomic within a filesystem). A failure at any point removes
// the temporary file and leaves any previous file at `path` untouched.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>

#include <unistd.h>

namespace vla::io {

inline void write_atomically(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write,
                             std::ios::openmode mode = std::ios::out) {
  namespace fs = std::filesystem;
  if (path.has_parent_path() && !fs::exists(path.parent_path())) fs::create_directories(path.parent_path());
  const fs::path tmp = path.string() + fmt::format(".tmp.{}", ::getpid());
  try {
    {
      std::ofstream out(tmp, mode | std::ios::trunc);
      if (!out) throw std::runtime_error(fmt::format("cannot open '{}' for writing", tmp.string()));
      write(out);
      out.flush();
      if (!out) throw std::runtime_error(fmt::format("write to '{}' failed", tmp.string()));
    }
    fs::rename(tmp, path);
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
}

inline void write_text_atomically(const std::filesystem::path& path, const std::string& text) {
  write_atomically(path, [&](std::ostream& o) { o << text; });
}

}  // namespace vla::io
