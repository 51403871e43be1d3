#include "loom/model/attention_core.h"

#include <torch/torch.h>

#include "loom/model/cpu_gemm.h"

namespace loom::model {
namespace {

// libtorch's ops: what the node computes, and (float32) what autograd can differentiate twice.
torch::Tensor reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const torch::Tensor& mask, double scale) {
  // One baddbmm: the scores scaled and masked without two more passes over them.
  const torch::Tensor scores = torch::baddbmm(mask, q, k.transpose(1, 2), /*beta=*/1.0, scale);
  const bool wide =
      scores.scalar_type() == torch::kFloat32 || scores.scalar_type() == torch::kDouble;
  return torch::bmm(wide ? scores.softmax(-1) : softmax_kept_as(scores, scores.scalar_type()), v);
}

struct SoftmaxKept : torch::autograd::Function<SoftmaxKept> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& scores,
                               int64_t type) {
    // ATen's 16-bit softmax computes in float32 inside the kernel and rounds once (the same
    // values as a float32 softmax and a cast, on this CPU bit for bit) without the scores'
    // and the probabilities' float32 copies (8 bytes a score). _softmax: autocast would run
    // softmax itself in float32 on a GPU.
    const auto out_type = static_cast<at::ScalarType>(type);
    torch::Tensor out = scores.scalar_type() == out_type
                            ? at::_softmax(scores, -1, /*half_to_float=*/false)
                            : scores.softmax(-1, torch::kFloat32).to(out_type);
    ctx->save_for_backward({out});
    return out;
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    // In the probabilities' type: the kernel computes in float32 and rounds once, as float32
    // copies of both and a cast of the result did (a few values a million differ by one unit
    // in the last place: the sum's order), without their 12 bytes a score.
    const torch::Tensor out = ctx->get_saved_variables()[0];
    const torch::Tensor ds =
        torch::_softmax_backward_data(grads[0].to(out.scalar_type()), out, -1, out.scalar_type());
    return {ds, torch::Tensor()};  // autograd casts ds to the scores' type
  }
};

// The reference's values with the products through gemm_into; the softmax into *att.
torch::Tensor forward_products(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& mask, double scale,
                               torch::Tensor* att) {
  const int64_t b = q.size(0), t = q.size(1);
  torch::Tensor scores = torch::empty({b, t, t}, q.options());
  scores.copy_(mask.expand({b, t, t}));
  gemm_into(q, k.transpose(1, 2), scores, 1.f, static_cast<float>(scale));
  *att = scores.softmax(-1);
  scores = torch::Tensor();
  torch::Tensor y = torch::empty_like(v, at::MemoryFormat::Contiguous);
  gemm_into(*att, v, y, 0.f);
  return y;
}

struct Core : torch::autograd::Function<Core> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q,
                               const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& mask, double scale) {
    torch::Tensor att;
    torch::Tensor y = forward_products(q, k, v, mask, scale, &att);
    ctx->save_for_backward({q, k, v, att, mask});
    ctx->saved_data["scale"] = scale;
    return y;
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto s = ctx->get_saved_variables();
    const torch::Tensor &q = s[0], &k = s[1], &v = s[2], &att = s[3], &mask = s[4];
    const double scale = ctx->saved_data["scale"].toDouble();
    const torch::Tensor dy = grads[0].contiguous();
    if (torch::GradMode::is_enabled()) {
      // A second derivative: the reference again from the saved inputs, under autograd.
      std::vector<size_t> inputs;  // of q, k, v: those with a gradient
      std::vector<torch::Tensor> wrt;
      for (size_t j = 0; j < 3; ++j)
        if (s[j].requires_grad()) {
          inputs.push_back(j);
          wrt.push_back(s[j]);
        }
      auto g = torch::autograd::grad({reference(q, k, v, mask, scale)}, wrt, {dy},
                                     /*retain_graph=*/true, /*create_graph=*/true);
      torch::autograd::tensor_list out(5);
      for (size_t i = 0; i < inputs.size(); ++i) out[inputs[i]] = g[i];
      return out;
    }
    torch::Tensor dq, dk, dv;
    if (ctx->needs_input_grad(2)) {
      dv = torch::empty_like(v, at::MemoryFormat::Contiguous);
      gemm_into(att.transpose(1, 2), dy, dv, 0.f);
    }
    if (ctx->needs_input_grad(0) || ctx->needs_input_grad(1)) {
      torch::Tensor datt = torch::empty_like(att);
      gemm_into(dy, v.transpose(1, 2), datt, 0.f);
      const torch::Tensor ds = torch::_softmax_backward_data(datt, att, -1, att.scalar_type());
      datt = torch::Tensor();
      const float a = static_cast<float>(scale);
      if (ctx->needs_input_grad(0)) {
        dq = torch::empty_like(q, at::MemoryFormat::Contiguous);
        gemm_into(ds, k, dq, 0.f, a);
      }
      if (ctx->needs_input_grad(1)) {
        dk = torch::empty_like(k, at::MemoryFormat::Contiguous);
        gemm_into(ds.transpose(1, 2), q, dk, 0.f, a);
      }
    }
    return {dq, dk, dv, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

at::Tensor softmax_kept_as(const at::Tensor& scores, at::ScalarType type) {
  return SoftmaxKept::apply(scores, static_cast<int64_t>(type));
}

at::Tensor attention_core(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const at::Tensor& mask, double scale) {
  if (!onednn_takes(q, k, v) || !onednn_takes(mask, {})) return reference(q, k, v, mask, scale);
  if (torch::GradMode::is_enabled() &&
      (q.requires_grad() || k.requires_grad() || v.requires_grad()))
    return Core::apply(q.contiguous(), k.contiguous(), v.contiguous(), mask, scale);
  torch::Tensor att;
  return forward_products(q.contiguous(), k.contiguous(), v.contiguous(), mask, scale, &att);
}

}  // namespace loom::model
