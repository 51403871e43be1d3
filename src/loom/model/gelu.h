#pragma once
// The exact GELU the models use, x·Φ(x) (torch::gelu's default), differentiable: CPU float32
// tensors go through loom's kernel (gelu_kernel.h), everything else through torch::gelu.
#include <ATen/core/Tensor.h>

namespace loom::model {

at::Tensor gelu(const at::Tensor& x);

}  // namespace loom::model
