#pragma once
// What the transformer models (gpt.cpp, llama.cpp) share: blocks that may be split over a
// tensor-parallel group, the token embedding (vocabulary-parallel under tp), and layers that
// recompute a part of themselves in the backward (parallel.recompute). Internal to model/.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loom/model/model.h"

namespace loom::model {

// A block that may be split across a tensor-parallel group. Built whole first (the random
// initialization is the single-process one), then cut to this rank's part (keep_my_part).
class TpBlock : public Block {
 public:
  explicit TpBlock(const TensorParallel& tp) : tp_(tp) {}
  int tp_parts() const override { return tp_.size; }
  int tp_rank() const override { return tp_.rank; }

 protected:
  void keep_my_part();
  TensorParallel tp_;
};

// Token embedding, plus learned positions for the GPT (the Llama's positions are rotary, in its
// attention). Under tp each rank holds a part of the vocabulary's rows; with sequence
// parallelism it returns this rank's part of the sequence.
class TokenEmbedding : public TpBlock {
 public:
  // init_std > 0: token vectors drawn from N(0, init_std) (the Llama's, whose head may be this
  // matrix), else torch's N(0, 1).
  TokenEmbedding(int64_t vocab, int64_t seq_len, int64_t width, bool learned_positions,
                 const TensorParallel& tp, double init_std = 0);
  torch::Tensor forward(const torch::Tensor& idx) override;
  double flops_per_sample() const override { return double(seq_len_) * width_; }
  std::string kind() const override { return "embedding"; }
  const torch::Tensor& token_weight() const { return tok_->weight; }
  torch::Tensor tied_matrix() const override { return tok_->weight; }
  // Generation (tp = 1): the embedding of tokens at positions first, first + 1, ...
  torch::Tensor at(const torch::Tensor& idx, int64_t first);

 private:
  int64_t seq_len_, width_, part_;
  torch::nn::Embedding tok_{nullptr}, pos_{nullptr};
};

// The language-model head: the model's final norm, then the logits' product with the head's
// own weight or, tied, with the token embedding's (not a parameter of this block). Under tp:
// this rank's vocabulary columns of the logits (vocab_parallel_loss takes them).
class LmHead : public TpBlock {
 public:
  // norm: the model's norm module, registered as `norm_name`; apply_norm runs it on x.
  LmHead(const config::ModelConfig& c, const TensorParallel& tp, torch::Tensor tied, bool bias,
         const std::string& norm_name, std::shared_ptr<torch::nn::Module> norm,
         std::function<torch::Tensor(const torch::Tensor&)> apply_norm);
  torch::Tensor forward(const torch::Tensor& x) override;
  double flops_per_sample() const override { return 2.0 * seq_len_ * width_ * vocab_; }
  std::string kind() const override { return "head"; }
  torch::Tensor tied_matrix() const override { return tied_; }
  void set_tied_matrix(const torch::Tensor& m) override;

 private:
  int64_t vocab_, seq_len_, width_;
  torch::Tensor tied_;
  std::function<torch::Tensor(const torch::Tensor&)> apply_norm_;
  torch::nn::Linear head_{nullptr};
};

// Generation: the keys and values of the positions one layer has decoded so far.
struct KvCache {
  torch::Tensor k, v;  // [b, kv heads, positions, head dim]; undefined before the first call
  int64_t positions() const { return k.defined() ? k.size(2) : 0; }
};

// Causal attention of queries q [b, heads, n, hd] at the n positions after the cache's, over
// the cache and the new keys and values k, v [b, kv heads, n, hd] (appended to the cache;
// each key/value head serves heads / kv heads consecutive query heads). Returns
// [b, n, heads * hd].
torch::Tensor cached_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, KvCache& cache);

// What a recomputation runs again in the backward.
enum class Part : int64_t { Layer, AttentionCore };

// A transformer layer that can run its whole self or its attention core without keeping
// activations (only the input), and run it again with autograd in the backward (Chen et al.
// 2016; selective: Korthikanti et al. 2022). The part's parameters are inputs of the autograd
// node, so the weight gradients flow through it: a zero-bubble I leaves them, its W takes them.
class RecomputableLayer : public TpBlock {
 public:
  RecomputableLayer(const TensorParallel& tp, config::Recompute recompute)
      : TpBlock(tp), recompute_(recompute) {}
  // The layer (Part::Layer, from its input) or its attention core (from what the core takes).
  virtual torch::Tensor run(Part part, const torch::Tensor& x) = 0;
  std::vector<torch::Tensor> parameters_of(Part part) {
    return part == Part::Layer ? parameters() : std::vector<torch::Tensor>{};
  }
  torch::Tensor forward(const torch::Tensor& x) override;
  // Generation (tp = 1, no autograd): the layer on x [b, n, d], the n positions after the
  // cache's, with the keys and values of the earlier ones from the cache (which grows by n).
  virtual torch::Tensor decode(const torch::Tensor& x, KvCache& cache) = 0;

 protected:
  // The attention core of `x`, recomputed in the backward under selective recomputation.
  torch::Tensor core(const torch::Tensor& x);
  config::Recompute recompute_;
};

// Additive causal mask: 0 on and below the diagonal, -inf above.
torch::Tensor causal_mask(int64_t seq_len);

}  // namespace loom::model
