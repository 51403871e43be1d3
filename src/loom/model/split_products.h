#pragma once
// The column-parallel products that take a layer's input into a tensor-parallel split region:
// the GPT's qkv and fc, the Llama's q, k, v and gate, up, and the heads. With sequence
// parallelism that input is this rank's part of the sequence [b, s / T, h], all-gathered for
// the products. Autograd would keep the gathered whole for the weight gradients; these
// products keep only the part, in the type they compute in, and gather it again in the
// backward, as Megatron-LM does (Korthikanti et al. 2022, section 4.2.2): a layer keeps
// b·s·h / T of each such input instead of b·s·h. The backward posts that gather before the
// input-gradient products and waits for it after them, so that a device with its own
// communication engine hides it.
#include <torch/torch.h>

#include <vector>

#include "loom/model/tensor_parallel.h"

namespace loom::model {

struct LinearWeights {
  torch::Tensor weight;  // [out, in]
  torch::Tensor bias;    // [out], or undefined
};
inline LinearWeights weights_of(const torch::nn::Linear& l) {
  return {l->weight, l->bias};
}

// x w_i^T + b_i for each product i of the input x (this rank's part of the sequence under
// sequence parallelism): the outputs of apply_linear(enter_split(x, tp), w_i, b_i), computed
// once per call from one gather. record: whether a zero-bubble schedule's split backward
// records the products (linear_uses.h); a head tied to the token embedding is not recorded.
std::vector<torch::Tensor> split_products(const torch::Tensor& x,
                                          const std::vector<LinearWeights>& products,
                                          const TensorParallel& tp, bool record = true);

}  // namespace loom::model
