#pragma once
// Megatron-style tensor parallelism (Shoeybi et al. 2019) for the GPT: inside a transformer
// layer the QKV and MLP-up projections are split by output (column-parallel: whole attention
// heads, blocks of hidden units), the attention output and MLP-down projections by input
// (row-parallel), so each pair needs one all-reduce in the forward (g) and one in the backward
// (f, its conjugate). The embedding and the head are split by vocabulary; the loss is computed
// on the vocabulary shards without gathering the logits. LayerNorms, positions and the
// row-parallel biases are replicated: their gradients are the same on every tensor-parallel
// rank.
#include <torch/torch.h>

#include <string>
#include <vector>

#include "loom/comm/work.h"

namespace loom::comm {
class Backend;
}

namespace loom::model {

// This rank's place in its tensor-parallel group; size 1: no tensor parallelism.
struct TensorParallel {
  int size = 1;
  int rank = 0;
  comm::Backend* comm = nullptr;  // the group (size ranks)
  // Sequence parallelism (Korthikanti et al. 2022): between the split regions activations
  // are cut along the sequence, [b, s / size, h] per rank, so LayerNorms and residuals run on
  // a part of the sequence and the pipeline sends b·s·h / size.
  bool sequence = false;
};

// f: identity in the forward, all-reduce (sum) of the gradient in the backward.
torch::Tensor copy_to_tp(const torch::Tensor& x, const TensorParallel& tp);
// g: all-reduce (sum) in the forward, identity in the backward.
torch::Tensor reduce_from_tp(const torch::Tensor& x, const TensorParallel& tp);

// Into a split region: f, or with sequence parallelism an all-gather along the sequence
// (dim 1) whose backward reduce-scatters. Out of one: g, or a reduce-scatter along the
// sequence whose backward all-gathers.
torch::Tensor enter_split(const torch::Tensor& x, const TensorParallel& tp);
torch::Tensor leave_split(const torch::Tensor& x, const TensorParallel& tp);
// Sequence parallelism's exchanges over a group of T ranks: the parts [b, s / T, h] of the group
// gathered into [b, s, h] (part i at positions [i s / T, (i+1) s / T)), posted when made and
// complete at wait(); and this rank's part of the group's sum of [b, s, h].
class SequenceGather {
 public:
  SequenceGather(const torch::Tensor& part, comm::Backend& group);
  torch::Tensor wait();

 private:
  torch::Tensor part_, all_;
  comm::WorkPtr work_;
};
torch::Tensor gather_sequence(const torch::Tensor& part, comm::Backend& group);
torch::Tensor scatter_sequence_sum(const torch::Tensor& whole, comm::Backend& group);

// A replicated parameter as used outside the split regions: with sequence parallelism each
// rank sees only its part of the sequence, so the parameter's gradient is summed over the
// group in the backward (f on the parameter); otherwise the parameter itself.
torch::Tensor replicated(const torch::Tensor& param, const TensorParallel& tp);

// Mean cross entropy of logits split by vocabulary: `logits` [..., vocab / size] holds this
// rank's columns [vocab_begin, vocab_begin + vocab / size), `target` [...] the full token ids.
// Three small all-reduces (max, sum of exponentials, target logit) instead of gathering logits.
torch::Tensor vocab_parallel_loss(const torch::Tensor& logits, const torch::Tensor& target,
                                  const TensorParallel& tp);

// Whether a GPT parameter (by its name, "blocks.3.qkv.weight" or "qkv.weight") is split across
// tensor-parallel ranks (false: replicated).
bool tp_split(const std::string& name);
// Part `rank` of `parts` of a GPT parameter's full value (the full value when replicated): rows
// of each of Q, K and V for qkv, rows for fc and the vocabulary-split tok / head, columns for
// proj and out.
torch::Tensor tp_shard(const std::string& name, const torch::Tensor& full, int rank, int parts);
// The full value from all its parts, in rank order (tp_shard's inverse; checkpoints resumed
// under another tp).
torch::Tensor tp_unshard(const std::string& name, const std::vector<torch::Tensor>& parts);

}  // namespace loom::model
