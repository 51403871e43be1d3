#include "loom/model/autocast_linear.h"

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

namespace loom::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

at::Tensor cast_to(const at::Tensor& t, at::ScalarType type) {
  return t.defined() ? t.to(type) : t;
}

// The forward of both nodes below: x is in the product's type, w the float32 weight.
at::Tensor cast_forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                        const at::Tensor& bias) {
  ctx->save_for_backward({x, w});
  return at::linear(x, w.to(x.scalar_type()), cast_to(bias, x.scalar_type()));
}

// The gradients autograd asks for, in the product's type (autograd widens a weight's to its
// float32 type, as autocast's cast does in its backward). `first`: the index of x among the
// node's inputs (w follows it).
tensor_list cast_grads(AutogradContext* ctx, const at::Tensor& grad, size_t first) {
  const auto saved = ctx->get_saved_variables();
  const at::Tensor &x = saved[0], &w = saved[1];
  const int64_t k = x.size(-1), n = w.size(0);
  const at::Tensor dy = grad.contiguous().reshape({-1, n});
  at::Tensor dx, dw;
  if (ctx->needs_input_grad(first)) dx = dy.mm(w.to(dy.scalar_type())).view(x.sizes());
  if (ctx->needs_input_grad(first + 1)) dw = dy.t().mm(x.reshape({-1, k}).to(dy.scalar_type()));
  if (first == 0) return {dx, dw};
  return {ctx->needs_input_grad(0) ? dy.sum(0) : at::Tensor(), dx, dw};
}

// Autograd takes no undefined input, hence one node with a bias and one without (the bias
// first, as in cpu_gemm.cpp's float32 products).
struct CastLinear : torch::autograd::Function<CastLinear> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& bias, const at::Tensor& x,
                            const at::Tensor& w) {
    return cast_forward(ctx, x, w, bias);
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    return cast_grads(ctx, grads[0], /*first=*/1);
  }
};

struct CastLinearNoBias : torch::autograd::Function<CastLinearNoBias> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w) {
    return cast_forward(ctx, x, w, {});
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    return cast_grads(ctx, grads[0], /*first=*/0);
  }
};

}  // namespace

at::ScalarType product_type(const at::Tensor& x) {
  const c10::DeviceType device = x.device().type();
  if (x.scalar_type() == at::kFloat && at::autocast::is_autocast_enabled(device))
    return at::autocast::get_autocast_dtype(device);
  return x.scalar_type();
}

bool autocast_product(const at::Tensor& x, const at::Tensor& weight) {
  const c10::DeviceType device = x.device().type();
  if (weight.scalar_type() != at::kFloat || !at::autocast::is_autocast_enabled(device))
    return false;
  return x.scalar_type() == at::kFloat ||
         x.scalar_type() == at::autocast::get_autocast_dtype(device);
}

at::Tensor autocast_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  const at::Tensor in = x.to(product_type(x));  // x itself when already in that type
  const bool grad =
      in.requires_grad() || weight.requires_grad() || (bias.defined() && bias.requires_grad());
  if (!grad || !torch::GradMode::is_enabled())
    return at::linear(in, weight.to(in.scalar_type()), cast_to(bias, in.scalar_type()));
  return bias.defined() ? CastLinear::apply(bias, in, weight) : CastLinearNoBias::apply(in, weight);
}

}  // namespace loom::model
