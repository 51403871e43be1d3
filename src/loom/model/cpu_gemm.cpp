#include "loom/model/cpu_gemm.h"

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <atomic>

#include "loom/common/error.h"
#include "loom/model/autocast_linear.h"

// oneDNN's product of dense tensors, exported by libtorch from ATen/native/mkldnn/Matmul.h (a
// header the wheel does not ship): result = beta * result + alpha * mat1 mat2, float32 on CPUs
// with AVX-512 BW, VL and DQ.
namespace at::native {
TORCH_API void mkldnn_matmul(const Tensor& mat1, const Tensor& mat2, const Tensor& result,
                             float beta, float alpha);
}  // namespace at::native

namespace loom::model {
namespace {

bool onednn_can_run() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return at::hasMKLDNN() && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
  return false;
#endif
}

std::atomic<bool>& onednn_on() {
  static std::atomic<bool> on{onednn_can_run()};
  return on;
}

bool float32_cpu(const at::Tensor& t) {
  return !t.defined() || (t.device().is_cpu() && t.scalar_type() == at::kFloat);
}

// x [.., k] w^T + bias into a new [.., n] tensor; x contiguous.
at::Tensor product(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
  const int64_t k = x.size(-1), n = w.size(0);
  const at::Tensor x2 = x.reshape({-1, k});
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = n;
  // Made in its own shape and written through a 2-D view: the output is no view itself, so
  // that a tensor-parallel sum may update it in place (autograd forbids that on a view a
  // custom function returns).
  at::Tensor y = at::empty(shape, x.options());
  const at::Tensor y2 = y.view({x2.size(0), n});
  gemm_into(x2, w.t(), y2, 0.f);
  if (bias.defined()) y2.add_(bias);
  return y;
}

// x w^T + bias, x contiguous: through gemm_into, or for a bf16 x and a float32 weight
// (autocast_linear.h) the product CUDA's autocast runs, with the weight and bias cast.
at::Tensor forward_of(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
  if (x.scalar_type() == w.scalar_type()) return product(x, w, bias);
  return at::linear(x, w.to(x.scalar_type()), bias.defined() ? bias.to(x.scalar_type()) : bias);
}

// The forward of both nodes below: keeps what linear_grads needs (the weight itself, never a
// cast copy of it).
torch::Tensor linear_forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                             const torch::Tensor& w, const torch::Tensor& bias) {
  const torch::Tensor xc = x.contiguous();
  ctx->save_for_backward({xc, w});
  return forward_of(xc, w, bias);
}

// x w^T (+ bias)'s gradients: dx = dy w, dw = dy^T x, dbias = the sum of dy over the rows;
// only those autograd asks for (the split backward's I asks for no dw), in dy's type (a
// float32 weight's bf16 gradient is widened by autograd, as at autocast's cast). `first`: the
// index of x among the node's inputs (w follows it).
torch::autograd::tensor_list linear_grads(torch::autograd::AutogradContext* ctx,
                                          const torch::Tensor& grad, size_t first) {
  const auto saved = ctx->get_saved_variables();
  const torch::Tensor& x = saved[0];
  const torch::Tensor w = saved[1].to(grad.scalar_type());
  const int64_t k = x.size(-1), n = w.size(0);
  const torch::Tensor dy = grad.contiguous().reshape({-1, n});
  const bool want_x = ctx->needs_input_grad(first), want_w = ctx->needs_input_grad(first + 1);
  torch::Tensor dx, dw;
  if (torch::GradMode::is_enabled()) {
    // Building a graph of the backward (a second derivative): products autograd can
    // differentiate.
    if (want_x) dx = dy.mm(w).view(x.sizes());
    if (want_w) dw = dy.t().mm(x.reshape({-1, k}));
  } else {
    if (want_x) {
      dx = torch::empty(x.sizes(), x.options());
      gemm_into(dy, w, dx.view({-1, k}), 0.f);
    }
    if (want_w) {
      dw = torch::empty(w.sizes(), dy.options());
      gemm_into(dy.t(), x.reshape({-1, k}), dw, 0.f);
    }
  }
  if (first == 0) return {dx, dw};
  return {ctx->needs_input_grad(0) ? dy.sum(0) : torch::Tensor(), dx, dw};
}

// Autograd takes no undefined input, hence one function with a bias and one without. The bias
// comes first, as in libtorch's addmm: its gradient is accumulated before the weight's, so
// gradient buckets fill in the reverse order of the parameters (ParamBuffer).
struct Linear : torch::autograd::Function<Linear> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& bias,
                               const torch::Tensor& x, const torch::Tensor& w) {
    return linear_forward(ctx, x, w, bias);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    return linear_grads(ctx, grads[0], /*first=*/1);
  }
};

struct LinearNoBias : torch::autograd::Function<LinearNoBias> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& w) {
    return linear_forward(ctx, x, w, {});
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    return linear_grads(ctx, grads[0], /*first=*/0);
  }
};

}  // namespace

void use_cpu_gemm(config::CpuGemm choice) {
  const bool can = onednn_can_run();
  if (choice == config::CpuGemm::Onednn && !can)
    throw UsageError(
        "train.cpu_gemm = onednn needs a CPU with AVX-512 (BW, VL, DQ) and a libtorch with "
        "oneDNN; use auto or blas");
  onednn_on().store(choice == config::CpuGemm::Onednn || (choice == config::CpuGemm::Auto && can));
}

bool onednn_takes(const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
  return onednn_on().load(std::memory_order_relaxed) && float32_cpu(a) && float32_cpu(b) &&
         float32_cpu(c) && !at::autocast::is_autocast_enabled(at::kCPU);
}

std::string cpu_gemm_in_use() {
  return onednn_on().load() ? "onednn" : "blas";
}

void gemm_into(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out, float beta,
               float alpha) {
  LOOM_CHECK(beta == 0.f || beta == 1.f, "gemm_into: beta ", beta, " (0 or 1)");
  if (a.numel() > 0 && b.numel() > 0 && onednn_takes(a, b, out)) {
    at::native::mkldnn_matmul(a, b, out, beta, alpha);
    return;
  }
  // beta 0: libtorch ignores out's values (no NaN of an uninitialized buffer comes through).
  at::Tensor o = out;
  if (a.dim() == 3)
    at::baddbmm_out(o, o, a, b, beta, alpha);
  else
    at::addmm_out(o, o, a, b, beta, alpha);
}

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  const bool cast = autocast_product(x, weight);
  if (!cast && !onednn_takes(x, weight, bias))
    return torch::nn::functional::linear(x, weight, bias);
  const at::Tensor in = cast ? x.to(product_type(x)) : x;  // x itself when of that type
  const bool grad =
      in.requires_grad() || weight.requires_grad() || (bias.defined() && bias.requires_grad());
  if (grad && torch::GradMode::is_enabled())
    return bias.defined() ? Linear::apply(bias, in, weight) : LinearNoBias::apply(in, weight);
  return forward_of(in.contiguous(), weight, bias);
}

}  // namespace loom::model
