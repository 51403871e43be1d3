#include "loom/parallel/optimizer.h"

#include "loom/common/error.h"
#include "loom/parallel/fused_adamw.h"

namespace loom::parallel {
namespace {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<torch::Tensor> params,
                                                        const config::TrainConfig& t) {
  if (t.optimizer == config::Optimizer::AdamW) {
    auto o = torch::optim::AdamWOptions(t.lr)
                 .betas({t.beta1, t.beta2})
                 .eps(t.eps)
                 .weight_decay(t.weight_decay);
    return std::make_unique<FusedAdamW>(std::move(params), o);
  }
  if (t.optimizer == config::Optimizer::Sgd) {
    auto o = torch::optim::SGDOptions(t.lr).momentum(t.momentum).weight_decay(t.weight_decay);
    return std::make_unique<torch::optim::SGD>(std::move(params), o);
  }
  LOOM_USAGE("train.optimizer must be adamw or sgd, got '", t.optimizer, "'");
}

}  // namespace

StageOptimizer::StageOptimizer(std::vector<torch::Tensor> params, const config::TrainConfig& t)
    : params_(params),
      opt_(make_optimizer(std::move(params), t)),
      values_per_element_(t.optimizer == config::Optimizer::AdamW ? 2 : 1) {}

StageOptimizer::~StageOptimizer() = default;

void StageOptimizer::step(double lr, double grad_scale) {
  torch::NoGradGuard no_grad;
  if (grad_scale != 1.0)
    for (const auto& p : params_)
      if (p.grad().defined()) p.grad().mul_(grad_scale);
  for (auto& g : opt_->param_groups()) g.options().set_lr(lr);
  opt_->step();
}

int64_t StageOptimizer::state_bytes() const {
  int64_t n = 0;
  for (const auto& p : params_) n += p.numel();
  return values_per_element_ * n * 4;
}

void StageOptimizer::save(torch::serialize::OutputArchive& ar) const {
  opt_->save(ar);
}
void StageOptimizer::load(torch::serialize::InputArchive& ar) {
  opt_->load(ar);
}

}  // namespace loom::parallel
