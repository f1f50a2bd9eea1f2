#include "core/train/train_config.hpp"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>

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

template <class T> T knob_from_json(const nlohmann::json& j, std::string_view name) {
  if constexpr (std::is_enum_v<T>) {
    return parse_knob_value<T>(j.get<std::string>(), name);
  } else if constexpr (std::is_floating_point_v<T>) {
    return j.is_string() ? T(std::stod(j.get<std::string>())) : j.get<T>();
  } else {
    return j.get<T>();
  }
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
    throw std::invalid_argument(fmt::format("--seq-len: T = {} exceeds the positional embedding ({} rows)", task.length(), model.max_len));
  if (ood && task.task != "mqar") throw std::invalid_argument("--ood: only MQAR has an out-of-distribution mode");
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
  TrainConfig c;
  c.task.task = j.at("task"); c.task.pairs = j.at("pairs");
  c.task.seq_len = c.task.task == "copy" ? int(j.at("seq_len")) : 0;
  c.model.mixer.mixer = j.at("mixer"); c.model.vocab = j.at("vocab"); c.model.d_model = j.at("d_model");
  c.model.heads = j.at("heads"); c.model.d_head = j.at("d_head"); c.model.ffn = j.at("ffn"); c.model.layers = j.at("layers");
  c.model.max_len = j.at("max_len");
  // A knob the JSON lacks keeps its default, so a checkpoint that stores only some of the knobs (lambda0,
  // eps, refresh_period and refresh_eta alone, say) still resumes.
  for_each_knob(c.model.mixer, [&](const auto& k) {
    using T = typename std::decay_t<decltype(k)>::value_type;
    if (const auto it = j.find(std::string(k.name)); it != j.end()) k.value = knob_from_json<T>(*it, k.name);
  });
  c.steps = j.at("steps"); c.batch = j.at("batch"); c.seed = j.at("seed"); c.eval_every = j.at("eval_every");
  c.eval_batches = j.at("eval_batches"); c.eval_batch = j.at("eval_batch"); c.ood = j.at("ood");
  c.checkpoint_every = j.at("checkpoint_every"); c.opt.lr = j.at("lr"); c.opt.beta1 = j.at("beta1"); c.opt.beta2 = j.at("beta2");
  c.opt.eps = j.at("adam_eps"); c.opt.weight_decay = j.at("weight_decay"); c.opt.warmup_frac = j.at("warmup_frac");
  c.opt.clip = j.at("clip");
  return c;
}

}  // namespace vla::train
