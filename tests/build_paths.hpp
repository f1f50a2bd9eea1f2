#pragma once
// Where the tests find the build's programs and the source tree, read at run time: a test object then
// carries no absolute path of its clone, so that one compile cache serves every clone of the repository
// (ccache, CMakeLists.txt) and the test executables run from wherever the build folder is.
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace vla::test {

// The build folder: test executables live in <build>/bin (CMAKE_RUNTIME_OUTPUT_DIRECTORY).
inline const std::filesystem::path& binary_dir() {
  static const std::filesystem::path dir = std::filesystem::canonical("/proc/self/exe").parent_path().parent_path();
  return dir;
}

// The source tree this build was configured from, as CMake recorded it in <build>/CMakeCache.txt.
inline const std::filesystem::path& source_dir() {
  static const std::filesystem::path dir = [] {
    const auto cache = binary_dir() / "CMakeCache.txt";
    std::ifstream in(cache);
    const std::string key = "CMAKE_HOME_DIRECTORY:INTERNAL=";
    for (std::string line; std::getline(in, line);)
      if (line.rfind(key, 0) == 0) return std::filesystem::path(line.substr(key.size()));
    throw std::runtime_error("no " + key + " line in " + cache.string() +
                             ": the test executable is not in <build>/bin of a configured build");
  }();
  return dir;
}

}  // namespace vla::test
