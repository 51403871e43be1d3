#include "loom/model/gelu.h"

#include <torch/torch.h>

#include "loom/model/gelu_kernel.h"

namespace loom::model {
namespace {

torch::Tensor forward_kernel(const torch::Tensor& x) {
  torch::Tensor y = torch::empty_like(x, at::MemoryFormat::Contiguous);
  gelu_forward(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}

struct Gelu : torch::autograd::Function<Gelu> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x) {
    ctx->save_for_backward({x});  // what torch::gelu keeps, no more
    return forward_kernel(x);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const torch::Tensor x = ctx->get_saved_variables()[0];
    const torch::Tensor g = grads[0].contiguous();
    // Building a graph of the backward (a second derivative): libtorch's formula, which autograd
    // can differentiate; the kernel's result would be a constant to it.
    if (torch::GradMode::is_enabled()) return {torch::gelu_backward(g, x)};
    torch::Tensor dx = torch::empty_like(x, at::MemoryFormat::Contiguous);
    gelu_backward(g.data_ptr<float>(), x.data_ptr<float>(), dx.data_ptr<float>(), x.numel());
    return {dx};
  }
};

}  // namespace

at::Tensor gelu(const at::Tensor& x) {
  if (!x.device().is_cpu() || x.scalar_type() != at::kFloat || !x.is_contiguous())
    return torch::gelu(x);
  if (x.requires_grad() && torch::GradMode::is_enabled()) return Gelu::apply(x);
  return forward_kernel(x);
}

}  // namespace loom::model
