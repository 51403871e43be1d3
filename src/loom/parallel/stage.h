#pragma once
// A pipeline stage: a contiguous chunk of the model's blocks plus the per-micro-batch state
// that lives between its forward and backward (input, output; on the last stage the loss).
// The stage knows nothing about schedules; the executor calls it in whatever order the
// schedule says.
#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "loom/model/compute.h"
#include "loom/model/linear_uses.h"
#include "loom/model/model.h"

namespace loom::parallel {

struct NamedParam {
  std::string name;  // "blocks.3.qkv.weight" (global block index)
  torch::Tensor tensor;
  // Tensor parallelism: part `tp_part` of `tp_parts` of a split parameter; -1 for a whole one
  // (replicated on the tp_parts ranks of the group).
  int tp_part = -1;
  int tp_parts = 1;
};

// The name a parameter's state has in checkpoints (state_chunks.h): its name, and for a part
// of a tensor-parallel split "#tp<part>of<parts>" (each part a tensor of its own shape;
// model::tp_shard() says how the parts make the whole).
inline std::string checkpoint_name(const NamedParam& p) {
  if (p.tp_part < 0) return p.name;
  return p.name + "#tp" + std::to_string(p.tp_part) + "of" + std::to_string(p.tp_parts);
}

using ActivationSpec = model::TensorSpec;

class Stage {
 public:
  // loss: what the last stage computes from its output and the targets (in fp32). The blocks
  // must already be on compute.device; bf16 runs them under autocast.
  Stage(int index, int num_stages, std::vector<std::shared_ptr<model::Block>> blocks,
        int first_block, model::LossFn loss = &model::Model::loss, model::Compute compute = {});

  int index() const { return index_; }
  bool is_first() const { return index_ == 0; }
  bool is_last() const { return index_ == num_stages_ - 1; }
  const std::vector<NamedParam>& params() const { return params_; }
  const std::vector<std::shared_ptr<model::Block>>& blocks() const { return blocks_; }
  const model::Compute& compute() const { return compute_; }
  torch::TensorOptions options(torch::Dtype t) const {
    return torch::dtype(t).device(compute_.device);
  }
  int64_t num_parameters() const;

  // Runs the blocks on `input` (tokens on the first stage, else an activation; the stage
  // detaches it and makes it require grad, so each stage owns its own autograd graph).
  // On the last stage `target` must be defined; the loss times loss_scale is kept for the
  // backward. Returns the output activation (last stage: the unscaled loss).
  torch::Tensor forward(int mb, const torch::Tensor& input, const torch::Tensor& target,
                        double loss_scale);
  // Forward without autograd state (evaluation). Returns fp32 logits on the last stage.
  torch::Tensor forward_eval(const torch::Tensor& input);
  // The spec of this stage's output for an input of spec `in`: the blocks run once, without
  // autograd, on zeros of that shape (valid token ids too). Needs the parameters (not zero3-
  // emptied), so it runs before the data-parallel synchronizers are built.
  ActivationSpec output_spec(const ActivationSpec& in);

  // Full backward of micro-batch mb: accumulates weight gradients and returns the gradient of
  // the stage input (undefined on the first stage). grad_output is ignored on the last stage.
  torch::Tensor backward(int mb, const torch::Tensor& grad_output);
  // Zero-bubble split (model/linear_uses.h): I, the input gradient now (with every gradient
  // but the matrix products' weight gradients; the graph is released), and W, those weight
  // gradients later from the products' inputs and output gradients. Needs
  // set_split_backward(true) before the forward.
  torch::Tensor backward_input(int mb, const torch::Tensor& grad_output);
  void backward_weight(int mb);
  // The executor sets it when the stage's actions hold I and W: the forward then records its
  // matrix products.
  void set_split_backward(bool on) { split_backward_ = on; }
  // A tensor no block registers whose gradient the backward accumulates too (a tied head's
  // copy: tied_head.h); the full backward does so anyway, the split one's I only for these.
  void add_grad_leaf(const torch::Tensor& t) { grad_tensors_.push_back(t); }

  // Last-stage statistics of the step (sum of unscaled losses, correct predictions), kept on
  // the device during the step: reading them is the step's one host synchronisation.
  double loss_sum() const;
  int64_t correct() const;
  int64_t counted() const { return counted_; }
  void reset_step_stats();

  int live_microbatches() const { return static_cast<int>(live_.size()); }
  int64_t live_activation_bytes() const;

 private:
  struct Live {
    torch::Tensor input;         // requires grad (not on the first stage)
    torch::Tensor output;        // activation, or scaled loss on the last stage
    model::SplitBackward split;  // its recorded products (split backward only)
    int64_t bytes = 0;           // rough size of what the graph holds (after I: I and W's)
  };
  torch::Tensor run_blocks(const torch::Tensor& input);  // under the compute's autocast
  Live take(int mb);

  int index_;
  int num_stages_;
  std::vector<std::shared_ptr<model::Block>> blocks_;
  model::LossFn loss_;
  model::Compute compute_;
  std::vector<NamedParam> params_;
  std::vector<torch::Tensor> grad_tensors_;  // the parameters' tensors, and add_grad_leaf's
  std::map<int, Live> live_;
  torch::Tensor loss_sum_, correct_;  // undefined: none this step
  int64_t counted_ = 0;
  bool classifier_ = false;
  bool split_backward_ = false;
};

}  // namespace loom::parallel
