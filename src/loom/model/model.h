#pragma once
// A model is an ordered list of blocks, ready to be cut into pipeline stages:
//   gpt: embedding (tokens + learned positions), N pre-LayerNorm transformer layers, final
//        LayerNorm + untied head (the architecture of bench/peers/gpt_model.py);
//   mlp / cnn: the layers of small Fashion-MNIST classifiers.
// The loss (cross entropy on the last block's logits) is separate from the blocks, so the
// pipeline computes it on the last stage only.
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loom/config/config.h"
#include "loom/model/tensor_parallel.h"

namespace loom::model {

class Block : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const torch::Tensor& x) = 0;
  // Forward FLOPs for one sample (multiply-add = 2 FLOPs), for balancing and MFU.
  virtual double flops_per_sample() const = 0;
  virtual std::string kind() const = 0;
  // Tensor parallelism (tensor_parallel.h): the ranks its split parameters are divided over.
  virtual int tp_parts() const { return 1; }
  virtual int tp_rank() const { return 0; }
  // Tied embeddings: the matrix the token embedding holds and a tied head multiplies by
  // (undefined for other blocks and an untied head). A tied head can be given another tensor
  // of that shape instead: the copy on a pipeline's last stage (parallel/tied_head.h).
  virtual torch::Tensor tied_matrix() const { return {}; }
  virtual void set_tied_matrix(const torch::Tensor& /*m*/) {}
};

// A loss of logits (or this rank's vocabulary shard of them) against targets.
using LossFn =
    std::function<torch::Tensor(const torch::Tensor& logits, const torch::Tensor& target)>;

// Shape and type of a tensor for one micro-batch (a stage's input or output).
struct TensorSpec {
  std::vector<int64_t> shape;
  torch::Dtype dtype = torch::kFloat32;
};

struct Model {
  std::string name;
  std::vector<std::shared_ptr<Block>> blocks;
  // Cross entropy over the last dimension of logits, mean over all positions.
  static torch::Tensor loss(const torch::Tensor& logits, const torch::Tensor& target);
  // The loss the last stage computes: loss(), or its vocabulary-parallel form under tp.
  LossFn criterion = &Model::loss;
  bool classifier = false;          // report accuracy
  double flops_per_sample() const;  // forward; training ~ 3x
  int64_t num_parameters() const;   // the whole model's, also under tensor parallelism
};

// Builds the full model with torch's default initialization after torch::manual_seed(seed):
// every rank builds the same parameters, then keeps only its stages. With tp.size > 1 (gpt),
// each split parameter is then cut to this rank's part (tp_shard), so the parts put together
// are the single-process parameters. recompute: what the gpt's layers recompute in the
// backward (the same gradients, less memory kept between forward and backward).
Model build(const config::ModelConfig& cfg, uint64_t seed, const TensorParallel& tp = {},
            config::Recompute recompute = config::Recompute::None);

// What the first block takes for one micro-batch: gpt [micro_batch, seq_len] token ids (int64),
// mlp / cnn [micro_batch, 1, 28, 28] images (float).
TensorSpec input_spec(const config::ModelConfig& cfg, int64_t micro_batch);

// Parameter name of block `index`'s parameter `local`: "blocks.3.qkv.weight".
std::string param_name(size_t block_index, const std::string& local);

}  // namespace loom::model
