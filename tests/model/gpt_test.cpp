// loom's GPT against a plain transcription of the forward pass of bench/peers/gpt_model.py's model,
// evaluated on loom's own parameters: same logits and same gradients, with either attention
// core (standard, flash) and every recomputation (none, selective, full).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <tuple>

#include "loom/model/model.h"

namespace {

using loom::model::Model;

std::map<std::string, torch::Tensor> params_by_name(const Model& m) {
  std::map<std::string, torch::Tensor> out;
  for (size_t i = 0; i < m.blocks.size(); ++i)
    for (const auto& p : m.blocks[i]->named_parameters())
      out[loom::model::param_name(i, p.key())] = p.value();
  return out;
}

// The forward pass of bench/peers/gpt_model.py's model, with explicit weights.
torch::Tensor reference_forward(std::map<std::string, torch::Tensor>& w, const torch::Tensor& idx,
                                int64_t layers, int64_t heads) {
  namespace F = torch::nn::functional;
  auto ln = [&](const torch::Tensor& x, const std::string& n) {
    return torch::layer_norm(x, {x.size(-1)}, w[n + ".weight"], w[n + ".bias"], 1e-5);
  };
  auto lin = [&](const torch::Tensor& x, const std::string& n) {
    auto bias = w.find(n + ".bias");  // GPT-2's head has none (model.head_bias)
    return torch::linear(x, w[n + ".weight"], bias == w.end() ? torch::Tensor() : bias->second);
  };
  const int64_t b = idx.size(0), t = idx.size(1);
  auto x = torch::embedding(w["blocks.0.tok.weight"], idx) +
           torch::embedding(w["blocks.0.pos.weight"], torch::arange(t, torch::kLong));
  const int64_t d = x.size(-1), hd = d / heads;
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = "blocks." + std::to_string(l + 1) + ".";
    auto qkv = lin(ln(x, p + "ln1"), p + "qkv").view({b, t, 3, heads, hd}).permute({2, 0, 3, 1, 4});
    auto a = torch::matmul(qkv[0], qkv[1].transpose(-1, -2)) / std::sqrt(double(hd));
    a = a.masked_fill(torch::triu(torch::ones({t, t}, torch::kBool), 1), -INFINITY).softmax(-1);
    x = x + lin(torch::matmul(a, qkv[2]).transpose(1, 2).reshape({b, t, d}), p + "proj");
    x = x + lin(torch::gelu(lin(ln(x, p + "ln2"), p + "fc")), p + "out");
  }
  const std::string h = "blocks." + std::to_string(layers + 1) + ".";
  return lin(ln(x, h + "lnf"), h + "head");
}

class Gpt : public ::testing::TestWithParam<
                std::tuple<loom::config::Attention, loom::config::Recompute>> {};

TEST_P(Gpt, MatchesTheReferenceForwardAndBackward) {
  loom::config::ModelConfig cfg;
  cfg.kind = loom::config::ModelKind::Gpt;
  cfg.seq_len = 16;
  cfg.width = 32;
  cfg.layers = 2;
  cfg.heads = 4;
  cfg.attention = std::get<0>(GetParam());
  Model m = loom::model::build(cfg, 7, {}, std::get<1>(GetParam()));
  auto w = params_by_name(m);
  ASSERT_TRUE(w.count("blocks.1.qkv.weight")) << "unexpected parameter names";
  torch::manual_seed(3);
  // A shorter sequence than seq_len too: the mask must be cut to t x t.
  for (int64_t t : {16, 11}) {
    auto idx = torch::randint(0, cfg.vocab, {3, t}, torch::kLong);
    auto tgt = torch::randint(0, cfg.vocab, {3, t}, torch::kLong);
    torch::Tensor x = idx;
    for (auto& blk : m.blocks) x = blk->forward(x);
    auto ref = reference_forward(w, idx, cfg.layers, cfg.heads);
    ASSERT_EQ(x.sizes(), ref.sizes());
    EXPECT_LT((x - ref).abs().max().item<double>(), 1e-5) << "t=" << t;

    for (auto& [n, p] : w) p.mutable_grad() = torch::Tensor();
    Model::loss(x, tgt).backward();
    std::map<std::string, torch::Tensor> g;
    for (auto& [n, p] : w) g[n] = p.grad().clone(), p.mutable_grad() = torch::Tensor();
    Model::loss(ref, tgt).backward();
    for (auto& [n, p] : w) {
      ASSERT_TRUE(g[n].defined() && p.grad().defined()) << n;
      const double rel =
          (g[n] - p.grad()).norm().item<double>() / (p.grad().norm().item<double>() + 1e-12);
      EXPECT_LT(rel, 1e-5) << n << " t=" << t;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AttentionAndRecompute, Gpt,
                         ::testing::Combine(::testing::Values(loom::config::Attention::Standard,
                                                              loom::config::Attention::Flash),
                                            ::testing::Values(loom::config::Recompute::None,
                                                              loom::config::Recompute::Selective,
                                                              loom::config::Recompute::Full)),
                         [](const auto& info) {
                           return loom::config::name_of(std::get<0>(info.param)) + "_" +
                                  loom::config::name_of(std::get<1>(info.param));
                         });

// The causal mask (and a Llama's rotary tables) are made once per model: every layer holds the
// same buffer, before and after the layers move (a per-layer copy was s² floats a layer).
TEST(LayerBuffers, OneCopyPerModelWhereverTheLayersMove) {
  for (auto kind : {loom::config::ModelKind::Gpt, loom::config::ModelKind::Llama}) {
    loom::config::ModelConfig cfg;
    cfg.kind = kind;
    cfg.seq_len = 16;
    cfg.width = 32;
    cfg.layers = 3;
    cfg.heads = 4;
    Model m = loom::model::build(cfg, 7);
    const std::vector<std::string> names = kind == loom::config::ModelKind::Gpt
                                               ? std::vector<std::string>{"mask"}
                                               : std::vector<std::string>{"mask", "cos", "sin"};
    auto buffers_of = [&](const std::string& name) {
      std::vector<torch::Tensor> out;
      for (size_t i = 1; i + 1 < m.blocks.size(); ++i)
        out.push_back(m.blocks[i]->named_buffers()[name]);
      return out;
    };
    for (const std::string& name : names) {
      const auto before = buffers_of(name);
      ASSERT_EQ(before.size(), 3u);
      for (const auto& b : before) EXPECT_EQ(b.data_ptr(), before[0].data_ptr()) << name;
    }
    for (auto& blk : m.blocks) blk->to(torch::kFloat64);  // each layer moved on its own
    for (const std::string& name : names) {
      const auto after = buffers_of(name);
      EXPECT_EQ(after[0].scalar_type(), torch::kFloat64) << name;
      for (const auto& b : after) EXPECT_EQ(b.data_ptr(), after[0].data_ptr()) << name;
    }
    // Still the model: a forward in float64 runs on the moved buffers.
    torch::Tensor x = torch::randint(0, cfg.vocab, {2, 16}, torch::kLong);
    for (auto& blk : m.blocks) x = blk->forward(x);
    EXPECT_TRUE(torch::isfinite(x).all().item<bool>());
  }
}

}  // namespace
