#include "loom/common/error.h"
#include "loom/parallel/fused_adamw.h"
#include "loom/parallel/grad_sync.h"

namespace loom::parallel {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<torch::Tensor> params,
                                                        const config::TrainConfig& t) {
  if (t.optimizer == "adamw") {
    auto o = torch::optim::AdamWOptions(t.lr)
                 .betas({t.beta1, t.beta2})
                 .eps(t.eps)
                 .weight_decay(t.weight_decay);
    return std::make_unique<FusedAdamW>(std::move(params), o);
  }
  if (t.optimizer == "sgd") {
    auto o = torch::optim::SGDOptions(t.lr).momentum(t.momentum).weight_decay(t.weight_decay);
    return std::make_unique<torch::optim::SGD>(std::move(params), o);
  }
  LOOM_USAGE("train.optimizer must be adamw or sgd, got '", t.optimizer, "'");
}

void set_lr(torch::optim::Optimizer& opt, double lr) {
  for (auto& g : opt.param_groups()) g.options().set_lr(lr);
}

double grad_sq_sum(const std::vector<torch::Tensor>& params) {
  double s = 0;
  for (const auto& p : params)
    if (p.grad().defined()) s += p.grad().pow(2).sum().item<double>();
  return s;
}

void scaled_step(torch::optim::Optimizer& opt, const std::vector<torch::Tensor>& params,
                 double lr, double grad_scale) {
  torch::NoGradGuard no_grad;
  if (grad_scale != 1.0)
    for (const auto& p : params)
      if (p.grad().defined()) p.grad().mul_(grad_scale);
  set_lr(opt, lr);
  opt.step();
  // Drop the gradients rather than zeroing them: the next backward then stores its gradient
  // tensors directly (no memset, no add into zeros), and AllReduceSync can hand out views of
  // its buckets as the averaged gradients.
  for (const auto& p : params) p.mutable_grad() = torch::Tensor();
}

}  // namespace loom::parallel
