#pragma once
// The attention core of the standard (non-flash) attention, softmax(mask + scale q k^T) v,
// differentiable. Where float32 CPU products go through oneDNN (cpu_gemm.h) it is one autograd
// node whose four products of the backward and two of the forward run there (libtorch's
// baddbmm and bmm would run on its BLAS); elsewhere it is those libtorch ops, with the softmax
// of bf16 scores through softmax_kept_as.
#include <ATen/core/Tensor.h>

namespace loom::model {

// q, k, v [B, t, hd]; mask [t, t], added to the scores (0 where a query sees a key, -inf
// where it does not; every row sees at least one key). Returns [B, t, hd].
at::Tensor attention_core(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const at::Tensor& mask, double scale);

// Softmax over the last dimension computed in float32 and returned in `type` (bf16 under
// autocast), keeping only that output for the backward, which takes it and its gradient in
// `type` and computes in float32 inside the kernel: 2 bytes per score kept, as Megatron-LM's
// fused softmax keeps. Autograd of a float32 softmax and a cast would keep the float32 output
// and its bf16 copy (6 bytes).
at::Tensor softmax_kept_as(const at::Tensor& scores, at::ScalarType type);

}  // namespace loom::model
