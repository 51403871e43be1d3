#include "loom/parallel/fused_adamw.h"

#include <cmath>
#include <optional>

#include "loom/parallel/adamw_kernel.h"

namespace loom::parallel {
namespace {

bool fusable(const torch::Tensor& t, const torch::Device& d) {
  return t.defined() && t.device() == d && t.scalar_type() == torch::kFloat32 && t.is_contiguous();
}

}  // namespace

torch::optim::AdamWParamState& FusedAdamW::state_of(const torch::Tensor& p) {
  void* key = p.unsafeGetTensorImpl();  // torch's own state key
  auto it = state_.find(key);
  if (it == state_.end()) {
    auto s = std::make_unique<torch::optim::AdamWParamState>();
    s->step(0);
    s->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    s->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    it = state_.emplace(key, std::move(s)).first;
  }
  auto& st = static_cast<torch::optim::AdamWParamState&>(*it->second);
  if (!st.exp_avg().is_contiguous() || !st.exp_avg_sq().is_contiguous()) {  // e.g. loaded
    st.exp_avg(st.exp_avg().contiguous());
    st.exp_avg_sq(st.exp_avg_sq().contiguous());
  }
  return st;
}

torch::Tensor FusedAdamW::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure) {
    torch::AutoGradMode enable_grad(true);
    loss = closure();
  }
  // One device for every parameter with a gradient, float32 and contiguous: a fused path.
  std::optional<torch::Device> device;
  bool all = true;
  for (auto& group : param_groups_) {
    auto& o = static_cast<torch::optim::AdamWOptions&>(group.options());
    all = all && !o.amsgrad();
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      if (!device) device = p.device();
      all = all && fusable(p, *device) && fusable(p.grad(), *device);
    }
  }
  if (!all || !device) return all ? loss : torch::optim::AdamW::step(nullptr);
  if (device->is_cpu())
    step_on_host();
  else
    step_on_device();
  return loss;
}

void FusedAdamW::step_on_device() {
  for (auto& group : param_groups_) {
    auto& o = static_cast<torch::optim::AdamWOptions&>(group.options());
    std::vector<torch::Tensor> params, grads, avgs, avg_sqs;
    int64_t step = 0;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& st = state_of(p);
      st.step(st.step() + 1);
      step = st.step();
      params.push_back(p);
      grads.push_back(p.grad());
      avgs.push_back(st.exp_avg());
      avg_sqs.push_back(st.exp_avg_sq());
    }
    if (params.empty()) continue;
    // The kernel reads each tensor's step count (already advanced) from the device; the
    // parameters of a group advance together.
    const torch::Tensor count = torch::full({}, double(step), params[0].options());
    const std::vector<torch::Tensor> steps(params.size(), count);
    at::_fused_adamw_(params, grads, avgs, avg_sqs, /*max_exp_avg_sqs=*/{}, steps, o.lr(),
                      std::get<0>(o.betas()), std::get<1>(o.betas()), o.weight_decay(), o.eps(),
                      /*amsgrad=*/false, /*maximize=*/false);
  }
}

void FusedAdamW::step_on_host() {
  for (auto& group : param_groups_) {
    auto& o = static_cast<torch::optim::AdamWOptions&>(group.options());
    const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& st = state_of(p);
      st.step(st.step() + 1);
      const double bc1 = 1.0 - std::pow(beta1, double(st.step()));
      const double bc2 = 1.0 - std::pow(beta2, double(st.step()));
      adamw_update(p.data_ptr<float>(), p.grad().data_ptr<float>(), st.exp_avg().data_ptr<float>(),
                   st.exp_avg_sq().data_ptr<float>(), p.numel(),
                   float(1.0 - o.lr() * o.weight_decay()), float(beta1), float(beta2),
                   float(o.lr() / bc1), float(std::sqrt(bc2)), float(o.eps()));
    }
  }
}

}  // namespace loom::parallel
