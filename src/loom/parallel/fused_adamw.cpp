#include "loom/parallel/fused_adamw.h"

#include <cmath>

#include "loom/parallel/adamw_kernel.h"

namespace loom::parallel {
namespace {

bool fusable(const torch::Tensor& t) {
  return t.defined() && t.device().is_cpu() && t.scalar_type() == torch::kFloat32 &&
         t.is_contiguous();
}

}  // namespace

torch::Tensor FusedAdamW::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure) {
    torch::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups_) {
    auto& o = static_cast<torch::optim::AdamWOptions&>(group.options());
    bool all = !o.amsgrad();
    for (auto& p : group.params())
      if (p.grad().defined() && !(fusable(p) && fusable(p.grad()))) all = false;
    if (!all) return torch::optim::AdamW::step(nullptr);  // every group on torch's path
  }
  for (auto& group : param_groups_) {
    auto& o = static_cast<torch::optim::AdamWOptions&>(group.options());
    const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
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
      if (!fusable(st.exp_avg()) || !fusable(st.exp_avg_sq())) {  // e.g. loaded non-contiguous
        st.exp_avg(st.exp_avg().contiguous());
        st.exp_avg_sq(st.exp_avg_sq().contiguous());
      }
      st.step(st.step() + 1);
      const double bc1 = 1.0 - std::pow(beta1, double(st.step()));
      const double bc2 = 1.0 - std::pow(beta2, double(st.step()));
      adamw_update(p.data_ptr<float>(), p.grad().data_ptr<float>(), st.exp_avg().data_ptr<float>(),
                   st.exp_avg_sq().data_ptr<float>(), p.numel(),
                   float(1.0 - o.lr() * o.weight_decay()), float(beta1), float(beta2),
                   float(o.lr() / bc1), float(std::sqrt(bc2)), float(o.eps()));
    }
  }
  return loss;
}

}  // namespace loom::parallel
