// Byte-level GPT, block for block the architecture of the DDP peer, bench/peers/ddp_gpt.py.
#include <cmath>

#include "loom/common/error.h"
#include "loom/model/model.h"

namespace loom::model {
namespace {

class Embedding : public Block {
 public:
  Embedding(int64_t vocab, int64_t seq_len, int64_t width) : seq_len_(seq_len), width_(width) {
    tok_ = register_module("tok", torch::nn::Embedding(vocab, width));
    pos_ = register_module("pos", torch::nn::Embedding(seq_len, width));
  }
  torch::Tensor forward(const torch::Tensor& idx) override {
    auto t = idx.size(1);
    LOOM_CHECK_LE(t, seq_len_, "sequence longer than model.seq_len");
    return tok_(idx) + pos_(torch::arange(t, torch::kLong));
  }
  double flops_per_sample() const override { return double(seq_len_) * width_; }
  std::string kind() const override { return "embedding"; }

 private:
  int64_t seq_len_, width_;
  torch::nn::Embedding tok_{nullptr}, pos_{nullptr};
};

class TransformerLayer : public Block {
 public:
  TransformerLayer(int64_t seq_len, int64_t width, int64_t heads)
      : seq_len_(seq_len), width_(width), heads_(heads) {
    ln1_ = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})));
    qkv_ = register_module("qkv", torch::nn::Linear(width, 3 * width));
    proj_ = register_module("proj", torch::nn::Linear(width, width));
    ln2_ = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})));
    fc_ = register_module("fc", torch::nn::Linear(width, 4 * width));
    out_ = register_module("out", torch::nn::Linear(4 * width, width));
    // Additive causal mask: 0 on and below the diagonal, -inf above.
    mask_ =
        torch::zeros({seq_len, seq_len})
            .masked_fill(torch::triu(torch::ones({seq_len, seq_len}, torch::kBool), 1), -INFINITY);
  }
  torch::Tensor forward(const torch::Tensor& x) override {
    auto b = x.size(0), t = x.size(1), hd = width_ / heads_;
    auto qkv = qkv_(ln1_(x)).view({b, t, 3, heads_, hd}).permute({2, 0, 3, 1, 4});
    auto q = qkv[0].reshape({b * heads_, t, hd}), k = qkv[1].reshape({b * heads_, t, hd}),
         v = qkv[2].reshape({b * heads_, t, hd});
    // softmax(mask + q k^T / sqrt(hd)) in one baddbmm: the same values as the reference's
    // matmul, divide and masked_fill, without two passes over the t x t scores (and their
    // backward), about 12% of the attention's time.
    auto att = torch::baddbmm(mask_.slice(0, 0, t).slice(1, 0, t), q, k.transpose(1, 2),
                              /*beta=*/1.0, /*alpha=*/1.0 / std::sqrt(double(hd)))
                   .softmax(-1);
    auto y = torch::bmm(att, v).view({b, heads_, t, hd}).transpose(1, 2).reshape({b, t, width_});
    auto h = x + proj_(y);
    return h + out_(torch::gelu(fc_(ln2_(h))));
  }
  double flops_per_sample() const override {
    double t = double(seq_len_), d = double(width_);
    // qkv 6td^2 + proj 2td^2 + mlp 16td^2, attention scores and mix 4t^2d.
    return 24.0 * t * d * d + 4.0 * t * t * d;
  }
  std::string kind() const override { return "transformer"; }

 private:
  int64_t seq_len_, width_, heads_;
  torch::nn::LayerNorm ln1_{nullptr}, ln2_{nullptr};
  torch::nn::Linear qkv_{nullptr}, proj_{nullptr}, fc_{nullptr}, out_{nullptr};
  torch::Tensor mask_;
};

class Head : public Block {
 public:
  Head(int64_t vocab, int64_t seq_len, int64_t width)
      : vocab_(vocab), seq_len_(seq_len), width_(width) {
    lnf_ = register_module("lnf", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})));
    head_ = register_module("head", torch::nn::Linear(width, vocab));
  }
  torch::Tensor forward(const torch::Tensor& x) override { return head_(lnf_(x)); }
  double flops_per_sample() const override { return 2.0 * seq_len_ * width_ * vocab_; }
  std::string kind() const override { return "head"; }

 private:
  int64_t vocab_, seq_len_, width_;
  torch::nn::LayerNorm lnf_{nullptr};
  torch::nn::Linear head_{nullptr};
};

}  // namespace

Model build_gpt(const config::ModelConfig& c) {
  Model m;
  m.name = "gpt";
  m.blocks.push_back(std::make_shared<Embedding>(c.vocab, c.seq_len, c.width));
  for (int64_t i = 0; i < c.layers; ++i)
    m.blocks.push_back(std::make_shared<TransformerLayer>(c.seq_len, c.width, c.heads));
  m.blocks.push_back(std::make_shared<Head>(c.vocab, c.seq_len, c.width));
  return m;
}

}  // namespace loom::model
