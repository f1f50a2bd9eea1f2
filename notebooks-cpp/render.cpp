// nb_render: runs a literate C++ notebook and writes it as Markdown with its outputs
// (notebooks-cpp/README.md). usage: nb_render SOURCE.cpp EXECUTABLE OUT.md [--quick]
// The source's "//md" lines become Markdown, the other lines code blocks (the NB_SHOW(); lines dropped);
// the program runs with NB_DIR = OUT.md's folder (its plots go there) and, with --quick, NB_QUICK=1; the
// output printed before the k-th NB_SHOW() is placed where that NB_SHOW() stands. Fails (exit 1, no
// OUT.md written) if the program fails or prints a different number of sections than the source marks.
#include "core/io/atomic_file.hpp"
#include "core/io/provenance.hpp"

#include <fmt/format.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>

namespace fs = std::filesystem;

namespace {

constexpr char kMark = '\x1e';

bool starts(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

std::string trim_left(const std::string& s) { return s.substr(std::min(s.size(), s.find_first_not_of(" \t"))); }

// One section of output as Markdown: text lines in a text block, "md" lines as they are.
std::string render_output(const std::vector<std::string>& lines) {
  std::string md, text;
  auto flush = [&] {
    while (!text.empty() && text.back() == '\n' && text.size() > 1 && text[text.size() - 2] == '\n') text.pop_back();
    if (!text.empty()) md += "```text\n" + text + "```\n\n";
    text.clear();
  };
  for (const auto& l : lines) {
    if (!l.empty() && l[0] == kMark && starts(l.substr(1), "md ")) {
      flush();
      md += l.substr(4) + "\n";
    } else if (!(text.empty() && l.empty())) {
      if (text.empty() && !md.empty() && md.back() == '\n' && md.size() > 1 && md[md.size() - 2] != '\n') md += "\n";  // end the Markdown
      text += l + "\n";
    }
  }
  flush();
  if (!md.empty() && md.back() != '\n') md += "\n";
  return md.empty() ? md : md + "\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: nb_render SOURCE.cpp EXECUTABLE OUT.md [--quick]\n");
    return 2;
  }
  const fs::path src = argv[1], exe = argv[2], out = argv[3];
  const bool quick = argc > 4 && std::string(argv[4]) == "--quick";
  std::ifstream in(src);
  if (!in) {
    std::fprintf(stderr, "nb_render: SOURCE: cannot read '%s'\n", src.c_str());
    return 2;
  }
  fs::create_directories(out.parent_path().empty() ? fs::path(".") : out.parent_path());

  // Run the notebook, its stdout captured line by line.
  const auto t0 = std::chrono::steady_clock::now();
  const std::string cmd = fmt::format("NB_DIR='{}' NB_QUICK={} '{}'", fs::absolute(out).parent_path().string(), quick ? 1 : 0, exe.string());
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) {
    std::fprintf(stderr, "nb_render: cannot run '%s'\n", exe.c_str());
    return 1;
  }
  std::vector<std::vector<std::string>> sections(1);
  std::string line;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), p)) {
    line += buf.data();
    if (line.empty() || line.back() != '\n') continue;
    line.pop_back();
    if (line == std::string(1, kMark) + "show") sections.emplace_back();
    else sections.back().push_back(line);
    line.clear();
  }
  const int status = ::pclose(p);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "nb_render: %s failed (status %d)\n", exe.c_str(), WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 1;
  }

  // The source as cells; each NB_SHOW(); takes the next section of output.
  std::string md, code;
  std::size_t shown = 0;
  bool in_md = false;
  auto flush_code = [&] {
    while (!code.empty() && code.back() == '\n' && (code.size() == 1 || code[code.size() - 2] == '\n')) code.pop_back();
    if (code.find_first_not_of(" \n") != std::string::npos) md += "```cpp\n" + code + "```\n\n";
    code.clear();
  };
  for (std::string l; std::getline(in, l);) {
    const std::string t = trim_left(l);
    if (starts(t, "//md")) {
      flush_code();
      md += (t.size() > 5 ? t.substr(5) : "") + "\n";
      in_md = true;
      continue;
    }
    if (in_md) { md += "\n"; in_md = false; }
    if (starts(t, "NB_SHOW();")) {
      flush_code();
      if (++shown < sections.size()) md += render_output(sections[shown - 1]);
      continue;
    }
    if (code.empty() && t.empty()) continue;
    code += l + "\n";
  }
  flush_code();
  if (shown + 1 != sections.size() || !sections.back().empty()) {
    std::fprintf(stderr, "nb_render: %s marks %zu outputs with NB_SHOW(); the program printed %zu sections%s\n", src.c_str(), shown,
                 sections.size() - 1, sections.back().empty() ? "" : " and output after the last NB_SHOW()");
    return 1;
  }
  const auto prov = vla::io::provenance();
  md += fmt::format("---\n*Rendered by `nb_render` from `notebooks-cpp/{}`{} at git {} on {} ({}), {:.1f} s.*\n", src.filename().string(),
                    quick ? " in quick mode (NB_QUICK=1: CI size, the numbers only show that it runs)" : "", prov.value("git", "?"),
                    prov.value("host", "?"), prov.value("utc", "?"), seconds);
  vla::io::write_text_atomically(out, md);
  std::printf("wrote %s (%zu outputs, %.1f s)\n", out.c_str(), shown, seconds);
  return 0;
}
