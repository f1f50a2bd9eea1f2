#include "core/io/provenance.hpp"

#include "vla_git_revision.h"  // generated at build time (core/git_revision.cmake)

#include <array>
#include <ctime>

#include <unistd.h>

namespace vla::io {

std::string git_revision() { return VLA_GIT_REVISION; }

nlohmann::json provenance(const std::string& device) {
  std::array<char, 256> host{};
  if (::gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
  std::time_t now = std::time(nullptr);
  std::array<char, 32> utc{};
  std::strftime(utc.data(), utc.size(), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
#ifdef NDEBUG
  const char* built = "optimised";
#else
  const char* built = "debug";
#endif
  return {{"git", git_revision()}, {"built", built}, {"host", host.data()}, {"utc", utc.data()}, {"device", device}};
}

}  // namespace vla::io
