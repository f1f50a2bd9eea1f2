#pragma once
// A model on the GPU as a step engine of core/train/trainer.cpp's loop (core/train/step_engine.hpp):
// GpuModel on one GPU (trainer.hpp's "cuda"), DataParallelModel over several (data_parallel.hpp's
// "cuda:N"). Model has GpuModel's training members: forward_backward, grad_norm, adamw_step,
// synchronize, params / set_params, adam_moments / set_adam_moments, and a constructor
// (ModelConfig, Params<float>, where...).
#include "core/train/step_engine.hpp"
#include "core/train/train_config.hpp"

#include <cmath>
#include <string>
#include <utility>

namespace vla::gpu::train {

template <class Model> class GpuEngine final : public vla::train::StepEngine {
 public:
  // The model with init_params(c.model, c.seed); `where` are the Model constructor's remaining arguments.
  template <class... Where>
  explicit GpuEngine(const vla::train::TrainConfig& c, Where&&... where)
      : m_(c.model, model::init_params<float>(c.model, c.seed), std::forward<Where>(where)...) {}

  vla::train::BatchResult forward(const vla::train::Batch& b, bool gradient) override {
    auto r = m_.forward_backward(b, gradient);
    return {r.loss, r.accuracy, std::move(r.S_fro), std::move(r.A_fro), {}};
  }
  double grad_norm(std::string* nonfinite_tensor) override {
    const double n = m_.grad_norm();
    if (!std::isfinite(n)) *nonfinite_tensor = "gradient";  // one fused reduction: the tensor is not known
    return n;
  }
  void apply(const vla::train::AdamWConfig& c, double lr, double clip_scale) override {
    m_.adamw_step(c, lr, clip_scale);
    m_.synchronize();  // the loop times the step: wait for the update (the next forward would wait anyway)
  }
  void export_state(model::Params<float>& p, vla::train::AdamWState<float>& opt) const override {
    p = m_.params();
    opt.step = m_.adam_moments(opt.m, opt.v);
  }
  void import_state(const model::Params<float>& p, const vla::train::AdamWState<float>& opt) override {
    m_.set_params(p);
    m_.set_adam_moments(opt.m, opt.v, opt.step);
  }

 private:
  Model m_;
};

}  // namespace vla::gpu::train
