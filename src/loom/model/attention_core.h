#pragma once
// The attention core of the standard (non-flash) attention, softmax(mask + scale q k^T) v,
// differentiable. Where float32 CPU products go through oneDNN (cpu_gemm.h) it is one autograd
// node whose four products of the backward and two of the forward run there (libtorch's
// baddbmm and bmm would run on its BLAS); elsewhere it is those libtorch ops.
#include <ATen/core/Tensor.h>

namespace loom::model {

// q, k, v [B, t, hd]; mask [t, t], added to the scores (0 where a query sees a key, -inf
// where it does not; every row sees at least one key). Returns [B, t, hd].
at::Tensor attention_core(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const at::Tensor& mask, double scale);

}  // namespace loom::model
