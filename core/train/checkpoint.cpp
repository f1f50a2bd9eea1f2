#include "core/train/checkpoint.hpp"

#include "core/io/atomic_file.hpp"

#include <fmt/format.h>

#include <fstream>
#include <stdexcept>

namespace vla::train {

namespace {

constexpr char kMagic[8] = {'V', 'L', 'A', 'C', 'K', 'P', 'T', '1'};

template <class X> void put(std::ostream& o, const X& x) { o.write(reinterpret_cast<const char*>(&x), sizeof x); }
template <class X> X get(std::istream& i) { X x{}; i.read(reinterpret_cast<char*>(&x), sizeof x); if (!i) throw std::runtime_error("checkpoint: truncated file"); return x; }

// Reads the header (magic, config, device) and leaves `in` at the step count.
Checkpoint read_header(std::ifstream& in, const std::filesystem::path& path) {
  if (!in) throw std::invalid_argument(fmt::format("--resume: no checkpoint at '{}'", path.string()));
  char magic[8];
  in.read(magic, 8);
  if (!in || std::string(magic, 8) != std::string(kMagic, 8))
    throw std::invalid_argument(fmt::format("--resume: '{}' is not a VLA training checkpoint", path.string()));
  Checkpoint c;
  std::string js(get<std::uint64_t>(in), '\0');
  in.read(js.data(), std::streamsize(js.size()));
  const auto j = nlohmann::json::parse(js);
  c.cfg = TrainConfig::from_json(j);
  c.device = j.value("device", std::string("cpu"));
  return c;
}

}  // namespace

void write_checkpoint(const std::filesystem::path& path, const Checkpoint& c) {
  io::write_atomically(path, [&](std::ostream& o) {
    o.write(kMagic, 8);
    nlohmann::json j = c.cfg.to_json();
    if (c.device != "cpu") j["device"] = c.device;
    const std::string js = j.dump();
    put<std::uint64_t>(o, js.size());
    o.write(js.data(), std::streamsize(js.size()));
    put<std::int64_t>(o, c.step);
    put<double>(o, c.wall_s);
    put<std::int64_t>(o, c.opt.step);
    put<std::uint64_t>(o, c.log.size());
    put<std::uint64_t>(o, c.log.empty() ? 0 : c.log[0].size());
    for (const auto& r : c.log) o.write(reinterpret_cast<const char*>(r.data()), std::streamsize(r.size() * sizeof(double)));
    for (const auto* P : {&c.p, &c.opt.m, &c.opt.v})
      for (const auto& m : P->t) {
        put<std::int64_t>(o, m.rows());
        put<std::int64_t>(o, m.cols());
        o.write(reinterpret_cast<const char*>(m.data()), std::streamsize(m.size() * sizeof(float)));
      }
  }, std::ios::out | std::ios::binary);
}

Checkpoint read_checkpoint_header(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return read_header(in, path);
}

Checkpoint read_checkpoint(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  Checkpoint c = read_header(in, path);
  c.step = int(get<std::int64_t>(in));
  c.wall_s = get<double>(in);
  c.opt.step = get<std::int64_t>(in);
  const auto rows = get<std::uint64_t>(in), cols = get<std::uint64_t>(in);
  c.log.assign(rows, std::vector<double>(cols));
  for (auto& r : c.log) in.read(reinterpret_cast<char*>(r.data()), std::streamsize(cols * sizeof(double)));
  c.p = model::init_params<float>(c.cfg.model, c.cfg.seed);
  c.opt.m = c.p.zeros_like();
  c.opt.v = c.p.zeros_like();
  for (auto* P : {&c.p, &c.opt.m, &c.opt.v})
    for (auto& m : P->t) {
      const auto r = get<std::int64_t>(in), cc = get<std::int64_t>(in);
      if (r != m.rows() || cc != m.cols()) throw std::runtime_error("checkpoint: tensor shape does not match its config");
      in.read(reinterpret_cast<char*>(m.data()), std::streamsize(m.size() * sizeof(float)));
      if (!in) throw std::runtime_error("checkpoint: truncated file");
    }
  return c;
}

}  // namespace vla::train
