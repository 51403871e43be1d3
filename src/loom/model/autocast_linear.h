#pragma once
// Matrix products inside an autocast region (train.precision = bf16) that keep the float32
// weight for the backward instead of its bf16 copy. Autocast casts a weight for each use and
// autograd keeps that copy until the backward; a rank runs each micro-batch's forward in its
// own autocast region, so every micro-batch in flight (up to the pipeline's depth under 1F1B)
// would hold a bf16 copy of the stage's matrices, 2 bytes per parameter each. These products
// cast the weight again in the backward instead (a memory-bound pass over the matrix, small
// beside the product). The product is the one CUDA's autocast runs (input, weight and bias in
// bf16, one fused product) on every device; the CPU's autocast adds a bias in float32 after a
// bf16 product, which rounds differently in the last bit.
#include <ATen/core/Tensor.h>

namespace loom::model {

// The type a product computes in for input x: autocast's lower type for a float32 x inside an
// autocast region on x's device, else x's own.
at::ScalarType product_type(const at::Tensor& x);

// Whether an autocast region on x's device makes linear() (cpu_gemm.h) of this weight a cast
// product: x cast to product_type, the weight and bias cast inside the product, the float32
// weight kept for the backward.
bool autocast_product(const at::Tensor& x, const at::Tensor& weight);

}  // namespace loom::model
