// Byte-level GPT, block for block the architecture of the DDP peer, bench/peers/ddp_gpt.py;
// with tensor parallelism (tensor_parallel.h) each block computes its part and meets the other
// ranks of its group in f / g.
#include <cmath>

#include "loom/common/error.h"
#include "loom/model/compute.h"
#include "loom/model/model.h"

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

// A block that may be split across a tensor-parallel group. Built whole first (the random
// initialization is the single-process one), then cut to this rank's part.
class TpBlock : public Block {
 public:
  explicit TpBlock(const TensorParallel& tp) : tp_(tp) {}
  int tp_parts() const override { return tp_.size; }
  int tp_rank() const override { return tp_.rank; }

 protected:
  void keep_my_part() {
    if (tp_.size == 1) return;
    torch::NoGradGuard no_grad;
    for (auto& p : named_parameters())
      if (tp_split(p.key()))
        p.value().set_data(tp_shard(p.key(), p.value(), tp_.rank, tp_.size).clone());
  }
  TensorParallel tp_;
};

class Embedding : public TpBlock {
 public:
  Embedding(int64_t vocab, int64_t seq_len, int64_t width, const TensorParallel& tp)
      : TpBlock(tp), seq_len_(seq_len), width_(width), part_(vocab / tp.size) {
    tok_ = register_module("tok", torch::nn::Embedding(vocab, width));
    pos_ = register_module("pos", torch::nn::Embedding(seq_len, width));
    keep_my_part();
  }
  torch::Tensor forward(const torch::Tensor& idx) override {
    auto t = idx.size(1);
    LOOM_CHECK_LE(t, seq_len_, "sequence longer than model.seq_len");
    const auto positions = torch::dtype(torch::kLong).device(idx.device());
    if (tp_.size == 1) return tok_(idx) + pos_(torch::arange(t, positions));
    // This rank's rows of the vocabulary; the other tokens get zeros, the sum over the group
    // the embedding.
    const torch::Tensor local = idx - part_ * tp_.rank;
    const torch::Tensor other = (local < 0).logical_or(local >= part_);
    const torch::Tensor e = tok_(local.masked_fill(other, 0)).masked_fill(other.unsqueeze(-1), 0);
    if (!tp_.sequence) return reduce_from_tp(e, tp_) + pos_(torch::arange(t, positions));
    // Sequence parallelism: this rank's positions of the summed embedding.
    const int64_t n = t / tp_.size;
    return leave_split(e, tp_) +
           F::embedding(torch::arange(tp_.rank * n, (tp_.rank + 1) * n, positions),
                        replicated(pos_->weight, tp_));
  }
  double flops_per_sample() const override { return double(seq_len_) * width_; }
  std::string kind() const override { return "embedding"; }

 private:
  int64_t seq_len_, width_, part_;
  torch::nn::Embedding tok_{nullptr}, pos_{nullptr};
};

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class TransformerLayer;

// What a recomputation runs again in the backward (parallel.recompute).
enum class Part : int64_t { Layer, AttentionCore };

// Runs a part of a layer without keeping its activations (only its input), and runs it again
// with autograd in the backward (Chen et al. 2016; selective: Korthikanti et al. 2022). The
// part's parameters are inputs of this node, so the weight gradients flow through it: a
// zero-bubble I (input gradient only) leaves them alone, its W takes them.
struct Recomputed : torch::autograd::Function<Recomputed> {
  // params: the part's parameters (a TensorList, so that each is an input of the node).
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t layer,
                               int64_t part, at::TensorList params);
  static variable_list backward(AutogradContext* ctx, variable_list grad);
};

class TransformerLayer : public TpBlock {
 public:
  TransformerLayer(int64_t seq_len, int64_t width, int64_t heads, const TensorParallel& tp,
                   config::Recompute recompute, config::Attention attention)
      : TpBlock(tp),
        seq_len_(seq_len),
        width_(width),
        heads_(heads),
        recompute_(recompute),
        flash_(attention == config::Attention::Flash) {
    ln1_ = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})));
    qkv_ = register_module("qkv", torch::nn::Linear(width, 3 * width));
    proj_ = register_module("proj", torch::nn::Linear(width, width));
    ln2_ = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})));
    fc_ = register_module("fc", torch::nn::Linear(width, 4 * width));
    out_ = register_module("out", torch::nn::Linear(4 * width, width));
    // Additive causal mask: 0 on and below the diagonal, -inf above. A buffer, so that it moves
    // with the layer to its device (not a parameter: no gradient, not in checkpoints).
    if (!flash_)
      mask_ = register_buffer(
          "mask", torch::zeros({seq_len, seq_len})
                      .masked_fill(torch::triu(torch::ones({seq_len, seq_len}, torch::kBool), 1),
                                   -INFINITY));
    keep_my_part();
  }
  torch::Tensor forward(const torch::Tensor& x) override {
    if (recompute_ == config::Recompute::Full && torch::GradMode::is_enabled()) {
      const std::vector<torch::Tensor> params = parameters();
      return Recomputed::apply(x, reinterpret_cast<int64_t>(this),
                               static_cast<int64_t>(Part::Layer), at::TensorList(params));
    }
    return run(Part::Layer, x);
  }
  // The layer, or the attention core of its QKV projections [b, t, 3 * local heads * hd]
  // (softmax(q k^T) v: no parameters).
  torch::Tensor run(Part part, const torch::Tensor& x) {
    if (part == Part::AttentionCore) return attention(x, heads_ / tp_.size);
    if (tp_.size == 1) {
      auto h = x + proj_(core(qkv_(ln1_(x))));
      return h + out_(torch::gelu(fc_(ln2_(h))));
    }
    // Column-parallel QKV (this rank's heads) and fc, row-parallel proj and out: one
    // all-reduce per pair in each direction; the replicated biases are added once, after it.
    // With sequence parallelism x is this rank's part of the sequence: all-gather into the
    // split region, reduce-scatter out of it.
    auto y = core(qkv_(enter_split(layer_norm(x, ln1_, tp_), tp_)));
    auto h = x + leave_split(F::linear(y, proj_->weight), tp_) + replicated(proj_->bias, tp_);
    auto z = torch::gelu(fc_(enter_split(layer_norm(h, ln2_, tp_), tp_)));
    return h + leave_split(F::linear(z, out_->weight), tp_) + replicated(out_->bias, tp_);
  }
  std::vector<torch::Tensor> parameters_of(Part part) {
    return part == Part::Layer ? parameters() : std::vector<torch::Tensor>{};
  }
  double flops_per_sample() const override {
    double t = double(seq_len_), d = double(width_);
    // qkv 6td^2 + proj 2td^2 + mlp 16td^2, attention scores and mix 4t^2d.
    return 24.0 * t * d * d + 4.0 * t * t * d;
  }
  std::string kind() const override { return "transformer"; }

 private:
  // The attention core, recomputed in the backward under selective recomputation (its
  // t x t scores and probabilities are most of a layer's activations).
  torch::Tensor core(const torch::Tensor& qkv) {
    if (recompute_ == config::Recompute::Selective && torch::GradMode::is_enabled())
      return Recomputed::apply(qkv, reinterpret_cast<int64_t>(this),
                               static_cast<int64_t>(Part::AttentionCore), at::TensorList());
    return attention(qkv, heads_ / tp_.size);
  }
  // Causal self-attention of `heads` heads from their projections qkv [b, t, 3 * heads * hd].
  torch::Tensor attention(const torch::Tensor& qkv_all, int64_t heads) const {
    auto b = qkv_all.size(0), t = qkv_all.size(1), hd = width_ / heads_;
    auto qkv = qkv_all.view({b, t, 3, heads, hd}).permute({2, 0, 3, 1, 4});
    if (flash_)  // one fused kernel; it keeps no t x t scores and recomputes them backward
      return at::scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], /*attn_mask=*/{},
                                              /*dropout_p=*/0.0, /*is_causal=*/true)
          .transpose(1, 2)
          .reshape({b, t, heads * hd});
    auto q = qkv[0].reshape({b * heads, t, hd}), k = qkv[1].reshape({b * heads, t, hd}),
         v = qkv[2].reshape({b * heads, t, hd});
    // softmax(mask + q k^T / sqrt(hd)) in one baddbmm: the same values as the reference's
    // matmul, divide and masked_fill, without two passes over the t x t scores (and their
    // backward), about 12% of the attention's time.
    auto att = torch::baddbmm(mask_.slice(0, 0, t).slice(1, 0, t), q, k.transpose(1, 2),
                              /*beta=*/1.0, /*alpha=*/1.0 / std::sqrt(double(hd)))
                   .softmax(-1);
    return torch::bmm(att, v).view({b, heads, t, hd}).transpose(1, 2).reshape({b, t, heads * hd});
  }

  int64_t seq_len_, width_, heads_;
  config::Recompute recompute_;
  bool flash_;
  torch::nn::LayerNorm ln1_{nullptr}, ln2_{nullptr};
  torch::nn::Linear qkv_{nullptr}, proj_{nullptr}, fc_{nullptr}, out_{nullptr};
  torch::Tensor mask_;
};

// Autograd contexts keep only IValues: the layer travels as its address (the model outlives
// every graph).
TransformerLayer* layer_at(int64_t address) {
  return reinterpret_cast<TransformerLayer*>(address);  // NOLINT(performance-no-int-to-ptr)
}

torch::Tensor Recomputed::forward(AutogradContext* ctx, const torch::Tensor& x, int64_t layer,
                                  int64_t part, at::TensorList) {
  ctx->saved_data["layer"] = layer;
  ctx->saved_data["part"] = part;
  ctx->saved_data["bf16"] = autocast_on(x.device());  // the recomputation runs as this did
  ctx->save_for_backward({x});
  return layer_at(layer)->run(static_cast<Part>(part), x);
}

variable_list Recomputed::backward(AutogradContext* ctx, variable_list grad) {
  auto* layer = layer_at(ctx->saved_data["layer"].toInt());
  const auto part = static_cast<Part>(ctx->saved_data["part"].toInt());
  const torch::Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
  std::vector<torch::Tensor> inputs = {x};
  for (const auto& p : layer->parameters_of(part)) inputs.push_back(p);
  torch::Tensor y;
  {
    torch::AutoGradMode on(true);
    AutocastScope autocast(x.device(), ctx->saved_data["bf16"].toBool());
    y = layer->run(part, x);
  }
  variable_list g = torch::autograd::grad({y}, inputs, {grad[0]}, /*retain_graph=*/false,
                                          /*create_graph=*/false, /*allow_unused=*/true);
  variable_list out = {g[0], torch::Tensor(), torch::Tensor()};  // x, layer, part
  out.insert(out.end(), g.begin() + 1, g.end());                 // the parameters
  return out;
}

class Head : public TpBlock {
 public:
  Head(int64_t vocab, int64_t seq_len, int64_t width, const TensorParallel& tp)
      : TpBlock(tp), vocab_(vocab), seq_len_(seq_len), width_(width) {
    lnf_ = register_module("lnf", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})));
    head_ = register_module("head", torch::nn::Linear(width, vocab));
    keep_my_part();
  }
  // Under tp: this rank's vocabulary columns of the logits (vocab_parallel_loss takes them).
  torch::Tensor forward(const torch::Tensor& x) override {
    return head_(enter_split(layer_norm(x, lnf_, tp_), tp_));
  }
  double flops_per_sample() const override { return 2.0 * seq_len_ * width_ * vocab_; }
  std::string kind() const override { return "head"; }

 private:
  int64_t vocab_, seq_len_, width_;
  torch::nn::LayerNorm lnf_{nullptr};
  torch::nn::Linear head_{nullptr};
};

}  // namespace

Model build_gpt(const config::ModelConfig& c, const TensorParallel& tp,
                config::Recompute recompute) {
  LOOM_CHECK(c.heads % tp.size == 0 && c.vocab % tp.size == 0, "tp ", tp.size,
             " must divide heads and vocab (preflight checks it)");
  Model m;
  m.name = "gpt";
  m.blocks.push_back(std::make_shared<Embedding>(c.vocab, c.seq_len, c.width, tp));
  for (int64_t i = 0; i < c.layers; ++i)
    m.blocks.push_back(std::make_shared<TransformerLayer>(c.seq_len, c.width, c.heads, tp,
                                                          recompute, c.attention));
  m.blocks.push_back(std::make_shared<Head>(c.vocab, c.seq_len, c.width, tp));
  if (tp.size > 1)
    m.criterion = [tp](const torch::Tensor& logits, const torch::Tensor& target) {
      return vocab_parallel_loss(logits, target, tp);
    };
  return m;
}

}  // namespace loom::model
