#pragma once
// Zero-bubble schedules split a stage's backward in two: I, the gradient of the stage's input
// (the previous stage waits for it), and W, the weight gradients (which can wait). The weight
// gradient of a product y = x w^T is dy^T x: W needs x and dy, nothing else, so I need not keep
// the graph. The models compute their matrix products with apply_linear(); while a RecordLinearUses
// scope is open on the thread (the stage's forward when its schedule splits the backward),
// each product that will need a weight gradient is recorded. I then asks autograd for the
// gradients of the input, of the other parameters and of every recorded y, and W adds dy^T x
// to each weight's gradient: the same product autograd computes for the full backward.
#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace loom::comm {
class Backend;
}

namespace loom::model {

struct LinearUse {
  torch::Tensor x;       // the product's input, or this rank's part of it (gather)
  torch::Tensor weight;  // the parameter
  // Where autograd delivers the output's gradient: the edge, not the output itself, which
  // nothing else may keep (a qkv output that the attention copies; a residual branch).
  // Dropped once I has the gradient.
  torch::autograd::Edge y;
  // Sequence parallelism: x is this rank's part of the sequence, which W gathers whole over
  // this group (the product kept only the part); null: x is the whole input.
  comm::Backend* gather = nullptr;
};

// Records into `into` while alive (one scope per thread at a time; scopes nest).
class RecordLinearUses {
 public:
  explicit RecordLinearUses(std::vector<LinearUse>* into);
  ~RecordLinearUses();
  RecordLinearUses(const RecordLinearUses&) = delete;
  RecordLinearUses& operator=(const RecordLinearUses&) = delete;

 private:
  std::vector<LinearUse>* previous_;
};

// x w^T + bias (bias may be undefined), as torch::nn::Linear computes it.
torch::Tensor apply_linear(const torch::Tensor& x, const torch::Tensor& weight,
                           const torch::Tensor& bias = {});
inline torch::Tensor apply_linear(const torch::Tensor& x, const torch::nn::Linear& l) {
  return apply_linear(x, l->weight, l->bias);
}
// Records the product y = x w^T of a use that computed it itself (split_products.h), when a
// scope is recording and the weight will need a gradient.
void record_linear_use(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& y,
                       comm::Backend* gather = nullptr);

// One micro-batch's backward in two, over a graph whose forward recorded `uses`.
class SplitBackward {
 public:
  // I: the gradient of `input` (undefined when `input` is: token ids), the gradients of the
  // `params` no recorded product owns (added to their .grad), and dy of every recorded
  // product (kept). grad_output: undefined for a scalar loss. Releases the graph.
  torch::Tensor input_grad(const torch::Tensor& output, const torch::Tensor& grad_output,
                           const torch::Tensor& input, const std::vector<torch::Tensor>& params);
  // W: dy^T x into each recorded weight's .grad (in dy's precision: bf16 under autocast, as
  // the autocast product's own backward; accumulated in the weight's).
  void weight_grads();
  // Bytes held between I and W (the buffers of the x's and dy's, each once).
  int64_t held_bytes() const;

  std::vector<LinearUse> uses;  // RecordLinearUses fills it during the forward

 private:
  std::vector<torch::Tensor> dys_;
  bool input_done_ = false;
};

// p.grad += g (or = g), keeping a defined gradient's storage (ParamBuffer views).
void accumulate_grad(const torch::Tensor& p, const torch::Tensor& g);

}  // namespace loom::model
