#pragma once
// Every result the toolkit writes carries where it came from: the git revision the binary was built
// from, the build type, the host and the UTC time it was made.
#include <nlohmann/json.hpp>

#include <string>

namespace vla::io {

std::string git_revision();
// {"git": ..., "built": "Release", "host": ..., "utc": "2026-11-22T17:00:00Z", "device": "cpu"}
nlohmann::json provenance(const std::string& device = "cpu");

}  // namespace vla::io
