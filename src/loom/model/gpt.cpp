// Byte-level GPT, block for block the architecture of the PyTorch peers, bench/peers/gpt_model.py;
// with tensor parallelism (tensor_parallel.h) each block computes its part and meets the other
// ranks of its group in f / g.
#include <cmath>

#include "loom/common/error.h"
#include "loom/model/attention_core.h"
#include "loom/model/cpu_gemm.h"
#include "loom/model/gelu.h"
#include "loom/model/linear_uses.h"
#include "loom/model/model.h"
#include "loom/model/split_products.h"
#include "loom/model/transformer_parts.h"

namespace loom::model {
namespace {

namespace F = torch::nn::functional;

// ln(x) with the LayerNorm's parameters as replicated() makes them (sequence parallelism sums
// their gradients over the group).
torch::Tensor layer_norm(const torch::Tensor& x, torch::nn::LayerNorm& ln,
                         const TensorParallel& tp) {
  if (!tp.sequence) return ln(x);
  const auto& o = ln->options;
  return F::layer_norm(x, F::LayerNormFuncOptions(o.normalized_shape())
                              .weight(replicated(ln->weight, tp))
                              .bias(replicated(ln->bias, tp))
                              .eps(o.eps()));
}

// sum + bias without a second [M, h] temporary beside the sum: the bias joins it in place (an
// add's backward keeps neither input, so autograd allows it), unless that would narrow the
// type the out-of-place sum has.
torch::Tensor plus_bias(const torch::Tensor& sum, const torch::Tensor& bias) {
  if (at::result_type(sum, bias) != sum.scalar_type()) return sum + bias;
  return sum.add_(bias);
}

class TransformerLayer : public RecomputableLayer {
 public:
  // `mask`: the model's causal mask, shared by its layers (undefined with flash attention).
  TransformerLayer(int64_t seq_len, int64_t width, int64_t heads, const TensorParallel& tp,
                   config::Recompute recompute, const torch::Tensor& mask)
      : RecomputableLayer(tp, recompute),
        seq_len_(seq_len),
        width_(width),
        heads_(heads),
        flash_(!mask.defined()) {
    ln1_ = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})));
    qkv_ = register_module("qkv", torch::nn::Linear(width, 3 * width));
    proj_ = register_module("proj", torch::nn::Linear(width, width));
    ln2_ = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})));
    fc_ = register_module("fc", torch::nn::Linear(width, 4 * width));
    out_ = register_module("out", torch::nn::Linear(4 * width, width));
    // A buffer, so that it moves with the layers to their device (one move for all: `to`
    // replaces a buffer's data in place); not a parameter: no gradient, not in checkpoints.
    if (!flash_) mask_ = register_buffer("mask", mask);
    keep_my_part();
  }
  // The layer, or the attention core of its QKV projections [b, t, 3 * local heads * hd]
  // (softmax(q k^T) v: no parameters).
  torch::Tensor run(Part part, const torch::Tensor& x) override {
    if (part == Part::AttentionCore) return attention(x, heads_ / tp_.size);
    if (tp_.size == 1) {
      auto h = x + apply_linear(core(apply_linear(ln1_(x), qkv_)), proj_);
      return h + apply_linear(model::gelu(apply_linear(ln2_(h), fc_)), out_);
    }
    // Column-parallel QKV (this rank's heads) and fc, row-parallel proj and out: one
    // all-reduce per pair in each direction; the replicated biases are added once, after it.
    // With sequence parallelism x is this rank's part of the sequence: all-gather into the
    // split region, reduce-scatter out of it.
    auto y = core(split_products(layer_norm(x, ln1_, tp_), {weights_of(qkv_)}, tp_)[0]);
    auto h = plus_bias(x + leave_split(apply_linear(y, proj_->weight), tp_),
                       replicated(proj_->bias, tp_));
    auto z = model::gelu(split_products(layer_norm(h, ln2_, tp_), {weights_of(fc_)}, tp_)[0]);
    return plus_bias(h + leave_split(apply_linear(z, out_->weight), tp_),
                     replicated(out_->bias, tp_));
  }
  torch::Tensor decode(const torch::Tensor& x, KvCache& cache) override {
    const auto b = x.size(0), n = x.size(1), hd = width_ / heads_;
    auto qkv = qkv_(ln1_(x)).view({b, n, 3, heads_, hd}).permute({2, 0, 3, 1, 4}).unbind(0);
    auto h = x + proj_(cached_attention(qkv[0], qkv[1], qkv[2], cache));
    return h + out_(model::gelu(fc_(ln2_(h))));
  }
  double flops_per_sample() const override {
    double t = double(seq_len_), d = double(width_);
    // qkv 6td^2 + proj 2td^2 + mlp 16td^2, attention scores and mix 4t^2d.
    return 24.0 * t * d * d + 4.0 * t * t * d;
  }
  std::string kind() const override { return "transformer"; }

 private:
  // Causal self-attention of `heads` heads from their projections qkv [b, t, 3 * heads * hd].
  torch::Tensor attention(const torch::Tensor& qkv_all, int64_t heads) const {
    auto b = qkv_all.size(0), t = qkv_all.size(1), hd = width_ / heads_;
    // unbind, not qkv[i]: the backward of three selects adds three zero-padded copies of the
    // whole projection; unbind's writes each part once (same values, ~4% of a step).
    auto qkv = qkv_all.view({b, t, 3, heads, hd}).permute({2, 0, 3, 1, 4}).unbind(0);
    if (flash_)  // one fused kernel; it keeps no t x t scores and recomputes them backward
      return at::scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], /*attn_mask=*/{},
                                              /*dropout_p=*/0.0, /*is_causal=*/true)
          .transpose(1, 2)
          .reshape({b, t, heads * hd});
    auto q = qkv[0].reshape({b * heads, t, hd}), k = qkv[1].reshape({b * heads, t, hd}),
         v = qkv[2].reshape({b * heads, t, hd});
    return attention_core(q, k, v, mask_.slice(0, 0, t).slice(1, 0, t), 1.0 / std::sqrt(double(hd)))
        .view({b, heads, t, hd})
        .transpose(1, 2)
        .reshape({b, t, heads * hd});
  }

  int64_t seq_len_, width_, heads_;
  bool flash_;
  torch::nn::LayerNorm ln1_{nullptr}, ln2_{nullptr};
  torch::nn::Linear qkv_{nullptr}, proj_{nullptr}, fc_{nullptr}, out_{nullptr};
  torch::Tensor mask_;
};

}  // namespace

Model build_gpt(const config::ModelConfig& c, const TensorParallel& tp,
                config::Recompute recompute) {
  LOOM_CHECK(c.heads % tp.size == 0 && c.vocab % tp.size == 0, "tp ", tp.size,
             " must divide heads and vocab (preflight checks it)");
  Model m;
  m.name = "gpt";
  // A tied head reads the token vectors as logits: GPT-2's N(0, 0.02) keeps its first logits
  // small, where torch's N(0, 1) would make them ~sqrt(width).
  auto embedding = std::make_shared<TokenEmbedding>(c.vocab, c.seq_len, c.width,
                                                    /*learned_positions=*/true, tp,
                                                    /*init_std=*/c.tie_embeddings ? 0.02 : 0.0);
  m.blocks.push_back(embedding);
  const torch::Tensor mask =
      c.attention == config::Attention::Flash ? torch::Tensor() : causal_mask(c.seq_len);
  for (int64_t i = 0; i < c.layers; ++i)
    m.blocks.push_back(
        std::make_shared<TransformerLayer>(c.seq_len, c.width, c.heads, tp, recompute, mask));
  torch::nn::LayerNorm lnf(torch::nn::LayerNormOptions({c.width}));
  m.blocks.push_back(std::make_shared<LmHead>(
      c, tp, c.tie_embeddings ? embedding->token_weight() : torch::Tensor(), c.head_bias, "lnf",
      lnf.ptr(), [lnf, tp](const torch::Tensor& x) mutable { return layer_norm(x, lnf, tp); }));
  if (tp.size > 1)
    m.criterion = [tp](const torch::Tensor& logits, const torch::Tensor& target) {
      return vocab_parallel_loss(logits, target, tp);
    };
  return m;
}

}  // namespace loom::model
