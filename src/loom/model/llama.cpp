// Llama-style decoder, computed as Hugging Face's LlamaForCausalLM computes it (so that exported
// weights give the same logits there): RMSNorm before attention and MLP, rotary position
// embeddings (rotate-half form), grouped-query attention (model.kv_heads), a SwiGLU MLP, no
// biases, and a head that is its own matrix or the token embedding (model.tie_embeddings).
// Tensor parallelism as in the GPT: column-parallel q, k, v (whole heads: tp divides kv_heads),
// gate and up, row-parallel o and down.
#include <cmath>
#include <utility>

#include "loom/common/error.h"
#include "loom/model/attention_core.h"
#include "loom/model/cpu_gemm.h"
#include "loom/model/linear_uses.h"
#include "loom/model/model.h"
#include "loom/model/split_products.h"
#include "loom/model/transformer_parts.h"

namespace loom::model {
namespace {

constexpr double kNormEps = 1e-5;  // exported as rms_norm_eps

struct RmsNormImpl : torch::nn::Module {
  explicit RmsNormImpl(int64_t width) {
    weight = register_parameter("weight", torch::ones({width}));
  }
  torch::Tensor weight;
};
TORCH_MODULE(RmsNorm);

// x / rms(x) * weight, in fp32 as Hugging Face computes it; the weight as replicated() makes it.
torch::Tensor rms_norm(const torch::Tensor& x, RmsNorm& n, const TensorParallel& tp) {
  const torch::Tensor x32 = x.to(torch::kFloat32);
  const torch::Tensor normed = x32 * torch::rsqrt(x32.pow(2).mean(-1, true) + kNormEps);
  return replicated(n->weight, tp) * normed.to(x.scalar_type());
}

torch::Tensor rotate_half(const torch::Tensor& x) {
  auto halves = x.chunk(2, -1);
  return torch::cat({-halves[1], halves[0]}, -1);
}

// Rotary angles of each position, and the causal mask (standard attention): the same for
// every layer, made once per model.
struct LayerTables {
  torch::Tensor cos, sin, mask;
};

LayerTables layer_tables(const config::ModelConfig& c) {
  const int64_t hd = c.width / c.heads;
  const torch::Tensor inv_freq =
      1.0 / torch::pow(c.rope_theta,
                       torch::arange(0, hd, 2, torch::kInt64).to(torch::kFloat32) / double(hd));
  const torch::Tensor angles =
      torch::outer(torch::arange(c.seq_len, torch::kInt64).to(torch::kFloat32), inv_freq);
  const torch::Tensor both = torch::cat({angles, angles}, -1);
  LayerTables t{both.cos(), both.sin(), torch::Tensor()};
  if (c.attention != config::Attention::Flash) t.mask = causal_mask(c.seq_len);
  return t;
}

class LlamaLayer : public RecomputableLayer {
 public:
  LlamaLayer(const config::ModelConfig& c, const TensorParallel& tp, config::Recompute recompute,
             const LayerTables& tables)
      : RecomputableLayer(tp, recompute),
        seq_len_(c.seq_len),
        width_(c.width),
        heads_(c.heads),
        kv_heads_(c.kv_heads ? c.kv_heads : c.heads),
        hd_(c.width / c.heads),
        ffn_(config::llama_ffn_width(c)),
        flash_(c.attention == config::Attention::Flash) {
    norm1_ = register_module("norm1", RmsNorm(width_));
    q_ = register_module("q", no_bias_linear(width_, heads_ * hd_));
    k_ = register_module("k", no_bias_linear(width_, kv_heads_ * hd_));
    v_ = register_module("v", no_bias_linear(width_, kv_heads_ * hd_));
    o_ = register_module("o", no_bias_linear(heads_ * hd_, width_));
    norm2_ = register_module("norm2", RmsNorm(width_));
    gate_ = register_module("gate", no_bias_linear(width_, ffn_));
    up_ = register_module("up", no_bias_linear(width_, ffn_));
    down_ = register_module("down", no_bias_linear(ffn_, width_));
    // The model's tables, shared by its layers: buffers, so that they move with the layers to
    // their device (one move for all: `to` replaces a buffer's data in place).
    cos_ = register_buffer("cos", tables.cos);
    sin_ = register_buffer("sin", tables.sin);
    if (!flash_) mask_ = register_buffer("mask", tables.mask);
    keep_my_part();
  }

  torch::Tensor run(Part part, const torch::Tensor& x) override {
    if (part == Part::AttentionCore) return attention(x);
    // Column-parallel q, k, v, gate, up (this rank's heads and units), row-parallel o and down:
    // with tp = 1 split_products are plain products and leave_split is the identity.
    const auto qkv = split_products(rms_norm(x, norm1_, tp_),
                                    {weights_of(q_), weights_of(k_), weights_of(v_)}, tp_);
    const torch::Tensor h =
        x + leave_split(
                apply_linear(core(torch::cat({rope(qkv[0]), rope(qkv[1]), qkv[2]}, -1)), o_), tp_);
    const auto gate_up =
        split_products(rms_norm(h, norm2_, tp_), {weights_of(gate_), weights_of(up_)}, tp_);
    return h + leave_split(apply_linear(torch::silu(gate_up[0]) * gate_up[1], down_), tp_);
  }
  torch::Tensor decode(const torch::Tensor& x, KvCache& cache) override {
    const auto b = x.size(0), n = x.size(1);
    const int64_t first = cache.positions();
    const torch::Tensor norm = rms_norm(x, norm1_, tp_);
    auto heads = [&](const torch::Tensor& y) { return y.view({b, n, -1, hd_}).transpose(1, 2); };
    const torch::Tensor y = cached_attention(heads(rope(q_(norm), first)),
                                             heads(rope(k_(norm), first)), heads(v_(norm)), cache);
    const torch::Tensor h = x + o_(y);
    const torch::Tensor m = rms_norm(h, norm2_, tp_);
    return h + down_(torch::silu(gate_(m)) * up_(m));
  }
  double flops_per_sample() const override {
    const double t = double(seq_len_), d = double(width_), a = double(heads_ * hd_);
    const double kv = double(kv_heads_ * hd_), f = double(ffn_);
    // q, k, v, o; gate, up, down; attention scores and mix.
    return 2.0 * t * (d * (2 * a + 2 * kv) + 3 * d * f) + 4.0 * t * t * a;
  }
  std::string kind() const override { return "transformer"; }

 private:
  static torch::nn::Linear no_bias_linear(int64_t in, int64_t out) {
    return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
  }
  // Rotary embedding of [b, t, heads * hd] (this rank's heads) at positions first, first + 1,
  // ...: position p turns each pair (i, i + hd/2) by p * theta^(-2i/hd).
  torch::Tensor rope(const torch::Tensor& y, int64_t first = 0) const {
    const auto b = y.size(0), t = y.size(1);
    const torch::Tensor v = y.view({b, t, -1, hd_});
    const auto cos = cos_.slice(0, first, first + t).unsqueeze(1).to(y.scalar_type());
    const auto sin = sin_.slice(0, first, first + t).unsqueeze(1).to(y.scalar_type());
    return (v * cos + rotate_half(v) * sin).view({b, t, -1});
  }
  // Causal attention of this rank's heads from [b, t, (heads + 2 kv_heads) * hd]; each key and
  // value head serves heads / kv_heads consecutive query heads.
  torch::Tensor attention(const torch::Tensor& qkv) const {
    const auto b = qkv.size(0), t = qkv.size(1);
    const int64_t h = heads_ / tp_.size, kv = kv_heads_ / tp_.size;
    auto parts = qkv.split({h * hd_, kv * hd_, kv * hd_}, -1);
    auto q = parts[0].view({b, t, h, hd_}).transpose(1, 2);
    auto k = parts[1].view({b, t, kv, hd_}).transpose(1, 2);
    auto v = parts[2].view({b, t, kv, hd_}).transpose(1, 2);
    if (kv != h) {
      k = k.repeat_interleave(h / kv, 1);
      v = v.repeat_interleave(h / kv, 1);
    }
    torch::Tensor y;
    if (flash_) {
      y = at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                           /*is_causal=*/true);
    } else if (q.scalar_type() == torch::kFloat32) {  // softmax in the inputs' type
      y = attention_core(q.reshape({b * h, t, hd_}), k.reshape({b * h, t, hd_}),
                         v.reshape({b * h, t, hd_}), mask_.slice(0, 0, t).slice(1, 0, t),
                         1.0 / std::sqrt(double(hd_)))
              .view({b, h, t, hd_});
    } else {  // bf16: the softmax in float32 as Hugging Face computes it, kept in bf16
      // The mask (0 or -inf) in the scores' type: the same values, and no float32 scores
      // (nor a float32 copy of their gradient) for the type promotion.
      auto scores = torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(double(hd_)) +
                    mask_.slice(0, 0, t).slice(1, 0, t).to(q.scalar_type());
      y = torch::matmul(softmax_kept_as(scores, q.scalar_type()), v);
    }
    return y.transpose(1, 2).reshape({b, t, h * hd_});
  }

  int64_t seq_len_, width_, heads_, kv_heads_, hd_, ffn_;
  bool flash_;
  RmsNorm norm1_{nullptr}, norm2_{nullptr};
  torch::nn::Linear q_{nullptr}, k_{nullptr}, v_{nullptr}, o_{nullptr};
  torch::nn::Linear gate_{nullptr}, up_{nullptr}, down_{nullptr};
  torch::Tensor cos_, sin_, mask_;
};

}  // namespace

Model build_llama(const config::ModelConfig& c, const TensorParallel& tp,
                  config::Recompute recompute) {
  const int64_t kv = c.kv_heads ? c.kv_heads : c.heads;
  LOOM_CHECK(
      kv % tp.size == 0 && c.vocab % tp.size == 0 && config::llama_ffn_width(c) % tp.size == 0,
      "tp ", tp.size, " must divide kv_heads, ffn_width and vocab (preflight checks it)");
  Model m;
  m.name = "llama";
  // Token vectors of N(0, 0.02), as Hugging Face initializes a Llama: torch's N(0, 1) would make
  // a tied head's first logits ~sqrt(width) large (an eval loss of 80 at step 10 was seen).
  auto embedding = std::make_shared<TokenEmbedding>(c.vocab, c.seq_len, c.width,
                                                    /*learned_positions=*/false, tp,
                                                    /*init_std=*/0.02);
  m.blocks.push_back(embedding);
  const LayerTables tables = layer_tables(c);
  for (int64_t i = 0; i < c.layers; ++i)
    m.blocks.push_back(std::make_shared<LlamaLayer>(c, tp, recompute, tables));
  RmsNorm norm(c.width);
  m.blocks.push_back(std::make_shared<LmHead>(
      c, tp, c.tie_embeddings ? embedding->token_weight() : torch::Tensor(), /*bias=*/false, "norm",
      norm.ptr(), [norm, tp](const torch::Tensor& x) mutable { return rms_norm(x, norm, tp); }));
  if (tp.size > 1)
    m.criterion = [tp](const torch::Tensor& logits, const torch::Tensor& target) {
      return vocab_parallel_loss(logits, target, tp);
    };
  return m;
}

}  // namespace loom::model
