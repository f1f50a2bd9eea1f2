#include "core/train/train_config.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace vla::train {

namespace {

// A knob's value in JSON: an enum by its name, a non-finite number as a string ("inf": JSON has no
// infinity, and nlohmann would write null).
template <class T> nlohmann::json knob_to_json(const T& v) {
  if constexpr (std::is_enum_v<T>) {
    return std::string(knob_value_name(v));
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(v)) return fmt::format("{}", v);
    return v;
  } else {
    return v;
  }
}

// The value `v` of the config's key `name` as T, exactly: refused (std::invalid_argument naming the key)
// when the JSON holds another type or a value T cannot represent, never converted silently (a float
// where an integer belongs, an integer beyond int, a string where a number belongs). A floating
// value may also be one of the strings knob_to_json writes for the non-finite ones.
template <class T> T exact_json_value(const nlohmann::json& v, std::string_view name) {
  if constexpr (std::is_enum_v<T>) {
    if (v.is_string()) return parse_knob_value<T>(v.get_ref<const std::string&>(), name);
  } else if constexpr (std::is_same_v<T, bool>) {
    if (v.is_boolean()) return v.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    if (v.is_number_unsigned() && std::in_range<T>(v.get<std::uint64_t>())) return T(v.get<std::uint64_t>());
    if (v.is_number_integer() && !v.is_number_unsigned() && std::in_range<T>(v.get<std::int64_t>())) return T(v.get<std::int64_t>());
  } else if constexpr (std::is_floating_point_v<T>) {
    if (v.is_number()) return v.get<T>();
    if (v.is_string()) {
      const auto& s = v.get_ref<const std::string&>();
      for (const T x : {std::numeric_limits<T>::infinity(), -std::numeric_limits<T>::infinity(), std::numeric_limits<T>::quiet_NaN(),
                        -std::numeric_limits<T>::quiet_NaN()})
        if (s == fmt::format("{}", x)) return x;
    }
  } else {
    static_assert(std::is_same_v<T, std::string>);
    if (v.is_string()) return v.get<std::string>();
  }
  const char* expected = std::is_enum_v<T>            ? "a string"
                         : std::is_same_v<T, bool>    ? "true or false"
                         : std::is_integral_v<T>      ? "an integer in the range of its type"
                         : std::is_floating_point_v<T> ? "a number (or \"inf\", \"-inf\", \"nan\")"
                                                       : "a string";
  // A scalar is quoted as JSON (ASCII, truncated); an array or object only by its type (dumping one is
  // recursive, and a file can nest them arbitrarily deep).
  const std::string got = v.is_structured() ? std::string("an ") + v.type_name()
                                            : v.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace).substr(0, 64);
  throw std::invalid_argument(fmt::format("{}: must be {}, got {}", name, expected, got));
}

// The value of key `name`, which must be there.
template <class T> T required_json_value(const nlohmann::json& j, std::string_view name) {
  const auto it = j.find(std::string(name));
  if (it == j.end()) throw std::invalid_argument(fmt::format("{}: missing", name));
  return exact_json_value<T>(*it, name);
}

}  // namespace

void TrainConfig::validate() const {
  task.validate();
  if (steps < 1) throw std::invalid_argument(fmt::format("--steps: must be >= 1, got {}", steps));
  if (batch < 1) throw std::invalid_argument(fmt::format("--batch: must be >= 1, got {}", batch));
  if (eval_every < 0) throw std::invalid_argument(fmt::format("--eval-every: must be >= 0 (0 = at the end), got {}", eval_every));
  if (eval_batches < 1 || eval_batch < 1) throw std::invalid_argument("--eval-batches: must be >= 1");
  if (checkpoint_every < 1) throw std::invalid_argument(fmt::format("--checkpoint-every: must be >= 1, got {}", checkpoint_every));
  if (model.vocab != kVocab)
    throw std::invalid_argument(fmt::format("--vocab: the tasks use a vocabulary of {}, got {}", kVocab, model.vocab));
  if (task.length() > model.max_len)
    throw std::invalid_argument(fmt::format("--seq-len: T = {} exceeds the positional embedding ({} rows; --max-len sets them)", task.length(), model.max_len));
  if (ood && task.task != "mqar") throw std::invalid_argument("--ood: only MQAR has an out-of-distribution mode");
  opt.validate();
  model.validate();
}

// The mixer's knobs are keys of their own (MixerConfig's field names), every one of them.
nlohmann::json TrainConfig::to_json() const {
  const auto& m = model;
  nlohmann::json j{{"task", task.task}, {"pairs", task.pairs}, {"seq_len", task.length()}, {"mixer", m.mixer.mixer},
                   {"vocab", m.vocab}, {"d_model", m.d_model}, {"heads", m.heads}, {"d_head", m.d_head}, {"ffn", m.ffn},
                   {"layers", m.layers}, {"max_len", m.max_len}, {"steps", steps}, {"batch", batch}, {"seed", seed},
                   {"eval_every", eval_every}, {"eval_batches", eval_batches}, {"eval_batch", eval_batch}, {"ood", ood},
                   {"checkpoint_every", checkpoint_every}, {"lr", opt.lr}, {"beta1", opt.beta1}, {"beta2", opt.beta2},
                   {"adam_eps", opt.eps}, {"weight_decay", opt.weight_decay}, {"warmup_frac", opt.warmup_frac},
                   {"clip", opt.clip}};
  for_each_knob(m.mixer, [&](const auto& k) { j[std::string(k.name)] = knob_to_json(k.value); });
  return j;
}

TrainConfig TrainConfig::from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw std::invalid_argument(fmt::format("the config must be a JSON object, got {}", j.type_name()));
  TrainConfig c;
  auto get = [&]<class T>(T& field, std::string_view name) { field = required_json_value<T>(j, name); };
  get(c.task.task, "task"); get(c.task.pairs, "pairs");
  // MQAR's T is 3n + 1 unless longer (TaskConfig keeps 0 for 3n + 1, as the command line does). The
  // task and n are checked before T is derived from n (a stored n of 2^31 - 1 would overflow 3n + 1).
  int seq_len = 0;
  get(seq_len, "seq_len");
  if (c.task.task == "copy") c.task.seq_len = seq_len;
  c.task.validate();
  if (c.task.task == "mqar") {
    if (seq_len < c.task.length())
      throw std::invalid_argument(fmt::format("seq_len: MQAR with n = {} needs T >= 3n + 1 = {}, got {}", c.task.pairs, c.task.length(), seq_len));
    if (seq_len > c.task.length()) c.task.seq_len = seq_len;
  }
  get(c.model.mixer.mixer, "mixer"); get(c.model.vocab, "vocab"); get(c.model.d_model, "d_model"); get(c.model.heads, "heads");
  get(c.model.d_head, "d_head"); get(c.model.ffn, "ffn"); get(c.model.layers, "layers"); get(c.model.max_len, "max_len");
  // A knob the JSON lacks keeps its default, so a checkpoint that stores only some of the knobs (lambda0,
  // eps, refresh_period and refresh_eta alone, say) still resumes. A knob it holds must be allowed.
  for_each_knob(c.model.mixer, [&](const auto& k) {
    using T = typename std::decay_t<decltype(k)>::value_type;
    if (const auto it = j.find(std::string(k.name)); it != j.end()) {
      k.value = exact_json_value<T>(*it, k.name);
      k.check();
    }
  });
  get(c.steps, "steps"); get(c.batch, "batch"); get(c.seed, "seed"); get(c.eval_every, "eval_every");
  get(c.eval_batches, "eval_batches"); get(c.eval_batch, "eval_batch"); get(c.ood, "ood"); get(c.checkpoint_every, "checkpoint_every");
  get(c.opt.lr, "lr"); get(c.opt.beta1, "beta1"); get(c.opt.beta2, "beta2"); get(c.opt.eps, "adam_eps");
  get(c.opt.weight_decay, "weight_decay"); get(c.opt.warmup_frac, "warmup_frac"); get(c.opt.clip, "clip");
  return c;
}

}  // namespace vla::train
