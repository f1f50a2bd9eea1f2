#pragma once
// checkpoint.bin files for the tests that attack the checkpoint reader (core/train/checkpoint.hpp):
// valid ones, each written by a tiny training run, and a file's frame taken apart (format, config JSON,
// the rest) and put back together with a fresh checksum, so that an edit reaches the checks behind it.
#include "core/io/crc32.hpp"
#include "core/train/trainer.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

namespace vla::fuzz {

// A small model (vocabulary 128, d = 4, one head of 4, FFN 8, max_len 8): a checkpoint of about 9 kB
// (the tied embedding, 128 x 4, is most of it), a step in well under a millisecond.
inline train::TrainConfig tiny_train_config(const std::string& mixer, const std::string& task = "mqar", int layers = 1) {
  train::TrainConfig c;
  c.model.d_model = 4; c.model.heads = 1; c.model.d_head = 4; c.model.ffn = 8; c.model.layers = layers; c.model.max_len = 8;
  c.model.mixer.mixer = mixer;
  c.task.task = task;
  c.task.pairs = 2;                          // MQAR: T = 7
  c.task.seq_len = task == "copy" ? 8 : 0;
  c.steps = 6; c.batch = 4; c.seed = 11; c.eval_batches = 1; c.eval_batch = 4; c.checkpoint_every = 2;
  return c;
}

// The bytes of checkpoint.bin of `cfg` stopped after `steps` steps on `device` (a run in progress: its
// log, its moments), written by train::train into a scratch folder that is removed again.
inline std::string trained_checkpoint(const train::TrainConfig& cfg, int steps, const train::Device& device = train::cpu_device()) {
  static int counter = 0;
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("vla-ckpt-{}-{}", ::getpid(), counter++);
  std::filesystem::remove_all(dir);
  train::RunOptions ro;
  ro.threads = 1;
  ro.stop_after = steps;
  train::train(cfg, dir, ro, device);
  std::ifstream in(dir / "checkpoint.bin", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  std::filesystem::remove_all(dir);
  return bytes;
}

// The valid checkpoints the fuzz tests start from, one per shape of the format: VLA on MQAR (the
// penalty's Wu, bu), gated DeltaNet on copy with 2 layers (Wg, bg), and linear attention (neither: (0, 0)
// tensors) recorded as a CUDA run (the config's "device" key; trained by the CPU engine under that name).
inline std::vector<std::string> valid_checkpoints() {
  train::Device cuda = train::cpu_device();
  cuda.name = "cuda";
  return {trained_checkpoint(tiny_train_config("vla"), 3), trained_checkpoint(tiny_train_config("deltanet", "copy", 2), 2),
          trained_checkpoint(tiny_train_config("linear"), 4, cuda)};
}

// A checkpoint taken apart: the format version ('1' or '2'), the config JSON, and the body (the step
// count through the last tensor; without format 2's checksum).
struct CheckpointFrame {
  char version = '2';
  std::string json;
  std::string body;

  // A file the tests made (well formed; throws std::logic_error otherwise).
  static CheckpointFrame of(const std::string& file) {
    if (file.size() < 16 || file.compare(0, 7, "VLACKPT") != 0) throw std::logic_error("CheckpointFrame: not a checkpoint");
    CheckpointFrame f;
    f.version = file[7];
    std::uint64_t len = 0;
    std::memcpy(&len, file.data() + 8, 8);
    const std::size_t end = file.size() - (f.version == '2' ? 4 : 0);
    if (16 + len > end) throw std::logic_error("CheckpointFrame: truncated");
    f.json = file.substr(16, len);
    f.body = file.substr(16 + len, end - 16 - len);
    return f;
  }

  // The file: magic, the JSON's length, the JSON, the body and (format 2) the CRC-32 of all that.
  std::string bytes() const {
    std::string out = std::string("VLACKPT") + version;
    const std::uint64_t len = json.size();
    out.append(reinterpret_cast<const char*>(&len), 8);
    out += json + body;
    if (version == '2') {
      const std::uint32_t crc = io::crc32(out);
      out.append(reinterpret_cast<const char*>(&crc), 4);
    }
    return out;
  }

  // Body offsets: the step (i64) at 0, the wall time (f64) at 8, the AdamW step (i64) at 16, the log's
  // rows and columns (u64) at 24 and 32, the log at 40, then the tensors: each (i64 rows, i64 cols,
  // rows * cols floats); tensor_offsets() lists where each tensor's rows field is.
  template <class X> X get(std::size_t at) const {
    X x;
    std::memcpy(&x, body.data() + at, sizeof x);
    return x;
  }
  template <class X> void set(std::size_t at, X x) { std::memcpy(body.data() + at, &x, sizeof x); }
  std::vector<std::size_t> tensor_offsets() const {
    std::vector<std::size_t> at;
    for (std::size_t p = 40 + get<std::uint64_t>(24) * get<std::uint64_t>(32) * 8; p < body.size();
         p += 16 + std::size_t(get<std::int64_t>(p) * get<std::int64_t>(p + 8)) * 4)
      at.push_back(p);
    return at;
  }
};

}  // namespace vla::fuzz
