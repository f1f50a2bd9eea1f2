#include "core/train/checkpoint.hpp"

#include "core/io/atomic_file.hpp"
#include "core/io/crc32.hpp"
#include "core/io/escape.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace vla::train {

namespace {

constexpr std::string_view kMagicPrefix = "VLACKPT";  // then the format version, one digit
constexpr char kFormat = '2';                         // what this build writes
constexpr std::size_t kMagicBytes = 8, kChecksumBytes = 4;
constexpr std::array<const char*, 3> kTensorSets{"parameters", "first moment", "second moment"};

template <class X> void put(std::string& o, const X& x) { o.append(reinterpret_cast<const char*>(&x), sizeof x); }

// The tensors of init_params(m) (core/model/params.hpp), in its order, as shapes only: the reader
// compares a file's tensors with them before it allocates anything of the config's size. Vectors are
// (n, 1); the tensors a rule does not use are (0, 0).
struct TensorShape {
  std::int64_t rows, cols;
};
std::vector<TensorShape> param_shapes(const model::ModelConfig& m) {
  const std::int64_t d = m.d_model, hd = std::int64_t(m.heads) * m.d_head, dh = m.d_head, H = m.heads, F = m.ffn;
  const Needs needs = rule_needs(m.mixer);
  const std::int64_t U = needs.penalty ? hd : 0, G = H * needs.gate_rows(m.d_head);
  std::vector<TensorShape> s{{m.vocab, d}, {m.max_len, d}};
  const std::array<TensorShape, model::kPerBlock> block{{
      {d, 1}, {d, 1},                                    // ln1.g, ln1.b
      {hd, d}, {hd, 1}, {hd, d}, {hd, 1}, {hd, d}, {hd, 1},  // Wq, bq, Wk, bk, Wv, bv
      {U, U ? dh : 0}, {U, U ? 1 : 0},                   // Wu, bu (penalty rules)
      {G, G ? d : 0}, {G, G ? 1 : 0},                    // Wg, bg (gated rules)
      {d, hd}, {d, 1}, {d, 1}, {d, 1},                   // Wo, bo, ln2.g, ln2.b
      {F, d}, {F, 1}, {d, F}, {d, 1}}};                  // W1, b1, W2, b2
  for (int l = 0; l < m.layers; ++l) s.insert(s.end(), block.begin(), block.end());
  s.push_back({d, 1});  // lnf.g
  s.push_back({d, 1});  // lnf.b
  return s;
}

// A device name as the trainer records it ("cpu", "cuda", "cuda:2"): lower-case letters, digits, '-',
// '_', ':'.
bool is_device_name(std::string_view s) {
  if (s.empty() || s.size() > 32) return false;
  for (const char ch : s)
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == ':')) return false;
  return true;
}

// A bounds-checked cursor over a checkpoint's bytes. Every size it is given may come from the file
// (any value): a read that does not fit in what is left is a refusal saying what was read, where, and
// where the file ends, and nothing is allocated for it.
class Reader {
 public:
  Reader(std::string_view bytes, std::size_t end_of_file, const std::string& source)
      : b_(bytes), end_(end_of_file), src_(source) {}

  std::size_t left() const { return b_.size() - pos_; }

  template <class... A> std::invalid_argument refuse(fmt::format_string<A...> f, A&&... a) const {
    return std::invalid_argument(src_ + ": " + fmt::format(f, std::forward<A>(a)...));
  }

  // `count` elements of `size` bytes each.
  std::string_view take(std::uint64_t count, std::size_t size, std::string_view what) {
    if (count > left() / size)
      throw refuse("truncated or corrupted: {} needs {} x {} bytes at byte {}, but only {} bytes follow (the file has {})", what,
                   count, size, pos_, left(), end_);
    const std::string_view r = b_.substr(pos_, std::size_t(count) * size);
    pos_ += r.size();
    return r;
  }
  // A (rows, cols) matrix of `size`-byte elements, without overflow for any rows and cols.
  std::string_view take_matrix(std::uint64_t rows, std::uint64_t cols, std::size_t size, std::string_view what) {
    if (cols != 0 && rows > left() / size / cols)
      throw refuse("truncated or corrupted: {} needs {} x {} x {} bytes at byte {}, but only {} bytes follow (the file has {})", what,
                   rows, cols, size, pos_, left(), end_);
    return take(rows * cols, size, what);
  }
  template <class X> X get(std::string_view what) {
    X x;
    std::memcpy(&x, take(1, sizeof x, what).data(), sizeof x);
    return x;
  }

 private:
  std::string_view b_;
  std::size_t pos_ = 0, end_;
  const std::string& src_;
};

// The config (and device) from the config JSON: it must parse, hold only the keys this build writes
// (and "device"), and be a valid TrainConfig. Messages from the config's checks quote file content,
// so they are escaped whole.
void read_config(Reader& in, std::string_view js, Checkpoint& c) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(js);
  } catch (const nlohmann::json::exception& e) {
    throw in.refuse("its config JSON does not parse: {}", io::escape_bytes(e.what()));
  }
  try {
    c.cfg = TrainConfig::from_json(j);
    c.cfg.validate();
  } catch (const std::invalid_argument& e) {
    throw in.refuse("its config is not a valid training config: {}", io::escape_bytes(e.what()));
  }
  const nlohmann::json known = c.cfg.to_json();
  for (const auto& [key, value] : j.items())
    if (key != "device" && !known.contains(key)) throw in.refuse("its config has a key this build does not know: '{}'", io::escape_bytes(key));
  if (const auto it = j.find("device"); it != j.end()) {
    if (!it->is_string()) throw in.refuse("its config's device must be a string, got a JSON {}", it->type_name());
    if (!is_device_name(it->get_ref<const std::string&>()))
      throw in.refuse("its config's device '{}' is not a device name (such as cpu, cuda)", io::escape_bytes(it->get_ref<const std::string&>(), 64));
    c.device = it->get<std::string>();
  }
}

// The step counters and the log: one row per step (step column 1..step, a finite loss), each of the
// trainer's 6 + 2 L columns (trainer.cpp log_header).
void read_progress(Reader& in, Checkpoint& c) {
  const auto step = in.get<std::int64_t>("the step");
  if (step < 0 || step > c.cfg.steps) throw in.refuse("its step {} is outside 0..{} (its config's steps)", step, c.cfg.steps);
  c.step = int(step);
  c.wall_s = in.get<double>("the wall time");
  if (!std::isfinite(c.wall_s) || c.wall_s < 0) throw in.refuse("its wall time {} is not a finite number >= 0", c.wall_s);
  c.opt.step = in.get<std::int64_t>("the AdamW step");
  if (c.opt.step != step) throw in.refuse("its AdamW step {} differs from its step {} (one update per step)", c.opt.step, step);
  const auto rows = in.get<std::uint64_t>("the log's row count"), cols = in.get<std::uint64_t>("the log's column count");
  const std::uint64_t want_cols = step == 0 ? 0 : 6 + 2 * std::uint64_t(c.cfg.model.layers);
  if (rows != std::uint64_t(step) || cols != want_cols)
    throw in.refuse("its log has {} rows of {} values; at step {} the log of a {}-layer model has {} rows of {}", rows, cols, step,
                    c.cfg.model.layers, step, want_cols);
  const std::string_view data = in.take(rows * cols, sizeof(double), "the log");  // < 2^31 * (2^32 + 6): no overflow
  c.log.assign(rows, std::vector<double>(cols));
  for (std::size_t i = 0; i < rows; ++i) {
    auto& r = c.log[i];
    std::memcpy(r.data(), data.data() + i * cols * sizeof(double), cols * sizeof(double));
    if (r[0] != double(i + 1) || !std::isfinite(r[1]))
      throw in.refuse("its log row {} is (step {}, loss {}), expected step {} and a finite loss", i + 1, r[0], r[1], i + 1);
  }
}

// Tensor i of n in init_params's order, by its name there.
std::string tensor_name(std::size_t i, std::size_t n) {
  if (i == model::TOK) return "tok_emb";
  if (i == model::POS) return "pos_emb";
  if (i + 2 == n) return "lnf.g";
  if (i + 1 == n) return "lnf.b";
  return fmt::format("block{}.{}", (i - 2) / model::kPerBlock, model::kBlockNames[(i - 2) % model::kPerBlock]);
}

// The parameters and the two moments: each tensor's shape must be init_params's for the config, its
// data present, every value finite, every second moment >= 0 (a mean of squared gradients).
void read_tensors(Reader& in, Checkpoint& c) {
  const model::ModelConfig& m = c.cfg.model;
  // Every tensor takes at least its 16-byte shape: a config that claims more tensors than the file can
  // hold is refused before their list is made.
  const std::uint64_t per_set = 4 + std::uint64_t(model::kPerBlock) * std::uint64_t(m.layers);
  if (3 * per_set > in.left() / 16)
    throw in.refuse("truncated or corrupted: its config's {}-layer model has 3 x {} tensors, more than the {} bytes left can hold",
                    m.layers, per_set, in.left());
  const std::vector<TensorShape> shapes = param_shapes(m);
  const std::size_t n = shapes.size();
  std::array<std::vector<std::string_view>, 3> data;
  for (std::size_t set = 0; set < 3; ++set)
    for (std::size_t i = 0; i < n; ++i) {
      const std::string what = fmt::format("tensor '{}' of the {}", tensor_name(i, n), kTensorSets[set]);
      const auto rows = in.get<std::int64_t>(what), cols = in.get<std::int64_t>(what);
      if (rows != shapes[i].rows || cols != shapes[i].cols)
        throw in.refuse("{} is ({}, {}), its config's model has ({}, {})", what, rows, cols, shapes[i].rows, shapes[i].cols);
      data[set].push_back(in.take_matrix(std::uint64_t(rows), std::uint64_t(cols), sizeof(float), what));
    }
  if (in.left() != 0)
    throw in.refuse("{} bytes follow its last tensor, where a checkpoint ends (format 1) or has its 4-byte checksum (format 2)",
                    in.left());

  // Every size is now the file's: allocating the config's model allocates what the file holds.
  c.p = model::init_params<float>(m, c.cfg.seed);
  c.opt.m = c.p.zeros_like();
  c.opt.v = c.p.zeros_like();
  const std::array<model::Params<float>*, 3> sets{&c.p, &c.opt.m, &c.opt.v};
  for (std::size_t set = 0; set < 3; ++set) {
    auto& P = *sets[set];
    if (P.t.size() != n) throw std::logic_error("checkpoint: param_shapes and init_params disagree on the tensor count");
    for (std::size_t i = 0; i < n; ++i) {
      Mat<float>& t = P.t[i];
      if (t.rows() != shapes[i].rows || t.cols() != shapes[i].cols)
        throw std::logic_error(fmt::format("checkpoint: param_shapes and init_params disagree on {}'s shape", P.names[i]));
      if (t.size() != 0) std::memcpy(t.data(), data[set][i].data(), data[set][i].size());  // (an unused tensor has no data pointer)
      for (Eigen::Index k = 0; k < t.size(); ++k) {
        const float x = t.data()[k];
        if (!std::isfinite(x) || (set == 2 && x < 0))
          throw in.refuse("tensor '{}' of the {} holds {} at ({}, {}){}", P.names[i], kTensorSets[set], x, k % t.rows(), k / t.rows(),
                          std::isfinite(x) ? ", a second moment is a mean of squares (>= 0)" : ", a non-finite value");
      }
    }
  }
}

}  // namespace

std::string encode_checkpoint(const Checkpoint& c) {
  std::string o(kMagicPrefix);
  o.push_back(kFormat);
  nlohmann::json j = c.cfg.to_json();
  if (c.device != "cpu") j["device"] = c.device;
  const std::string js = j.dump();
  put<std::uint64_t>(o, js.size());
  o += js;
  put<std::int64_t>(o, c.step);
  put<double>(o, c.wall_s);
  put<std::int64_t>(o, c.opt.step);
  put<std::uint64_t>(o, c.log.size());
  put<std::uint64_t>(o, c.log.empty() ? 0 : c.log[0].size());
  for (const auto& r : c.log) o.append(reinterpret_cast<const char*>(r.data()), r.size() * sizeof(double));
  for (const auto* P : {&c.p, &c.opt.m, &c.opt.v})
    for (const auto& m : P->t) {
      put<std::int64_t>(o, m.rows());
      put<std::int64_t>(o, m.cols());
      o.append(reinterpret_cast<const char*>(m.data()), std::size_t(m.size()) * sizeof(float));
    }
  put<std::uint32_t>(o, io::crc32(o));
  return o;
}

void write_checkpoint(const std::filesystem::path& path, const Checkpoint& c) {
  const std::string bytes = encode_checkpoint(c);
  io::write_atomically(path, [&](std::ostream& o) { o.write(bytes.data(), std::streamsize(bytes.size())); },
                       std::ios::out | std::ios::binary);
}

Checkpoint decode_checkpoint(std::string_view bytes, const std::string& source) {
  const std::string_view magic = bytes.substr(0, kMagicBytes);
  Reader frame(bytes, bytes.size(), source);
  if (magic.size() < kMagicBytes || magic.substr(0, kMagicPrefix.size()) != kMagicPrefix)
    throw frame.refuse("not a VLA training checkpoint: it begins with '{}', a checkpoint with 'VLACKPT1' or 'VLACKPT2'",
                       io::escape_bytes(magic));
  const char version = magic.back();
  if (version != '1' && version != '2')
    throw frame.refuse("checkpoint format version '{}' is not one this build reads (1, 2)", io::escape_bytes(magic.substr(7)));
  std::string_view body = bytes;
  if (version == '2') {  // the checksum first: a file that passes it holds exactly what write_checkpoint wrote
    if (bytes.size() < kMagicBytes + kChecksumBytes)
      throw frame.refuse("truncated: {} bytes, a format 2 checkpoint has at least {}", bytes.size(), kMagicBytes + kChecksumBytes);
    body = bytes.substr(0, bytes.size() - kChecksumBytes);
    std::uint32_t stored;
    std::memcpy(&stored, bytes.data() + body.size(), kChecksumBytes);
    if (const std::uint32_t actual = io::crc32(body); actual != stored)
      throw frame.refuse("corrupted: the CRC-32 of its first {} bytes is {:08x}, but its last 4 bytes record {:08x}: the file was "
                         "truncated or changed after it was written",
                         body.size(), actual, stored);
  }
  Reader in(body, bytes.size(), source);
  in.take(kMagicBytes, 1, "the magic");
  Checkpoint c;
  const auto json_bytes = in.get<std::uint64_t>("the config JSON's length");
  read_config(in, in.take(json_bytes, 1, "the config JSON"), c);
  read_progress(in, c);
  read_tensors(in, c);
  return c;
}

Checkpoint read_checkpoint(const std::filesystem::path& path, std::string_view flag) {
  const std::string quoted = io::escape_bytes(path.string(), 4096);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw std::invalid_argument(fmt::format("{}: no checkpoint at '{}'", flag, quoted));
  std::ifstream in(path, std::ios::binary);
  const std::string source = fmt::format("{}: '{}'", flag, quoted);
  if (!in) throw std::invalid_argument(fmt::format("{}: cannot open for reading", source));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::invalid_argument(fmt::format("{}: read error", source));
  return decode_checkpoint(bytes, source);
}

Checkpoint read_checkpoint_header(const std::filesystem::path& path) {
  Checkpoint c = read_checkpoint(path);
  c.step = 0;
  c.wall_s = 0;
  c.log.clear();
  c.p = {};
  c.opt = {};
  return c;
}

}  // namespace vla::train
