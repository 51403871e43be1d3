#include <torch/csrc/autograd/function_hook.h>

#include "loom/common/error.h"
#include "loom/parallel/fused_adamw.h"
#include "loom/parallel/grad_sync.h"

namespace loom::parallel {
namespace {

class AfterAccumulate : public torch::autograd::FunctionPostHook {
 public:
  explicit AfterAccumulate(std::function<void()> fn) : fn_(std::move(fn)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    fn_();
    return outputs;
  }

 private:
  std::function<void()> fn_;
};

}  // namespace

std::vector<std::shared_ptr<torch::autograd::Node>> on_grad_accumulated(
    const std::vector<torch::Tensor>& params, std::function<void(int)> on_ready) {
  std::vector<std::shared_ptr<torch::autograd::Node>> nodes;
  for (size_t i = 0; i < params.size(); ++i) {
    auto acc = torch::autograd::impl::grad_accumulator(params[i]);
    const int idx = static_cast<int>(i);
    acc->add_post_hook(std::make_unique<AfterAccumulate>([on_ready, idx] { on_ready(idx); }));
    nodes.push_back(std::move(acc));
  }
  return nodes;
}

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
