// Zero-bubble's split backward (model/linear_uses.h): I then W gives the gradients of one
// fused backward, for every model, with and without recomputation, on the first stage (token
// input) and on a later one (an activation input whose gradient I returns).
#include <gtest/gtest.h>
#include <malloc.h>
#include <torch/torch.h>

#include <algorithm>
#include <optional>
#include <string>
#include <tuple>

#include "loom/model/linear_uses.h"
#include "loom/model/model.h"

namespace {

using loom::config::ModelKind;
using loom::config::Recompute;
using loom::model::Model;

loom::config::ModelConfig tiny(ModelKind kind) {
  loom::config::ModelConfig c;
  c.kind = kind;
  c.seq_len = 16;
  c.width = 32;
  c.layers = 2;
  c.heads = 4;
  if (kind == ModelKind::Llama) c.kv_heads = 2;
  return c;
}

std::vector<torch::Tensor> params_of(const Model& m, size_t from) {
  std::vector<torch::Tensor> out;
  for (size_t b = from; b < m.blocks.size(); ++b)
    for (const auto& p : m.blocks[b]->parameters()) out.push_back(p);
  return out;
}

torch::Tensor run(Model& m, size_t from, torch::Tensor x) {
  for (size_t b = from; b < m.blocks.size(); ++b) x = m.blocks[b]->forward(x);
  return x;
}

class SplitBackward : public ::testing::TestWithParam<std::tuple<ModelKind, Recompute>> {};

TEST_P(SplitBackward, EqualsTheFusedBackward) {
  const auto [kind, recompute] = GetParam();
  const bool text = kind == ModelKind::Gpt || kind == ModelKind::Llama;
  Model fused = loom::model::build(tiny(kind), 7, {}, recompute);
  Model split = loom::model::build(tiny(kind), 7, {}, recompute);
  torch::manual_seed(3);
  const int64_t b = 3;
  torch::Tensor input = text ? torch::randint(0, 256, {b, 16}, torch::kLong)
                             : torch::randn({b, 1, 28, 28});  // Fashion-MNIST images
  torch::Tensor target =
      text ? torch::randint(0, 256, {b, 16}, torch::kLong) : torch::randint(0, 10, {b});
  // from = 0: the first stage (its input needs no gradient); from = 1: a later stage, fed the
  // first block's output.
  for (size_t from : {size_t(0), size_t(1)}) {
    SCOPED_TRACE("stage from block " + std::to_string(from));
    for (auto& p : params_of(fused, 0)) p.mutable_grad() = torch::Tensor();
    for (auto& p : params_of(split, 0)) p.mutable_grad() = torch::Tensor();
    torch::Tensor x_fused = input, x_split = input;
    if (from == 1) {
      torch::NoGradGuard no_grad;
      x_fused = fused.blocks[0]->forward(input).detach().requires_grad_(true);
      x_split = x_fused.detach().clone().requires_grad_(true);
    }
    Model::loss(run(fused, from, x_fused), target).backward();

    loom::model::SplitBackward sb;
    torch::Tensor out;
    {
      loom::model::RecordLinearUses record(&sb.uses);
      out = run(split, from, x_split);
    }
    EXPECT_FALSE(sb.uses.empty());
    torch::Tensor dx = sb.input_grad(Model::loss(out, target), torch::Tensor(),
                                     from == 1 ? x_split : torch::Tensor(), params_of(split, from));
    if (from == 1) {
      EXPECT_TRUE(torch::equal(dx, x_fused.grad())) << "input gradient";
    }
    sb.weight_grads();

    const auto want = params_of(fused, from), got = params_of(split, from);
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_TRUE(got[i].grad().defined()) << "parameter " << i << " has no gradient";
      EXPECT_TRUE(torch::equal(got[i].grad(), want[i].grad()))
          << "parameter " << i << " " << got[i].sizes() << ": max difference "
          << (got[i].grad() - want[i].grad()).abs().max().item<double>();
    }
  }
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<ModelKind, Recompute>>& info) {
  static const char* kinds[] = {"gpt", "mlp", "cnn", "llama"};  // ModelKind order
  static const char* recompute[] = {"none", "selective", "full"};
  return std::string(kinds[int(std::get<0>(info.param))]) + "_" +
         recompute[int(std::get<1>(info.param))];
}

INSTANTIATE_TEST_SUITE_P(Transformers, SplitBackward,
                         ::testing::Combine(::testing::Values(ModelKind::Gpt, ModelKind::Llama),
                                            ::testing::Values(Recompute::None, Recompute::Selective,
                                                              Recompute::Full)),
                         case_name);
// Recomputation is for the transformers only.
INSTANTIATE_TEST_SUITE_P(Classifiers, SplitBackward,
                         ::testing::Combine(::testing::Values(ModelKind::Mlp, ModelKind::Cnn),
                                            ::testing::Values(Recompute::None)),
                         case_name);

// Recording a forward for the split keeps nothing the fused backward's graph does not: the
// products' outputs are only named by their autograd edges (a qkv output the attention
// copies, a residual branch: nothing else keeps them).
TEST(SplitBackwardMemory, RecordingKeepsNoMoreThanTheGraph) {
  auto heap = [] {
    struct mallinfo2 mi = mallinfo2();
    return static_cast<double>(mi.uordblks) + static_cast<double>(mi.hblkhd);
  };
  loom::config::ModelConfig c = tiny(ModelKind::Gpt);
  c.width = 64;
  c.seq_len = 32;
  Model m = loom::model::build(c, 7);
  torch::Tensor x = torch::randn({4, c.seq_len, c.width});
  // Heap growth while a forward's graph is alive, smallest of 3 (as loom profile measures).
  auto kept = [&](bool record) {
    double least = 1e30;
    for (int i = 0; i < 3; ++i) {
      loom::model::SplitBackward sb;
      const double before = heap();
      torch::Tensor y;
      {
        std::optional<loom::model::RecordLinearUses> r;
        if (record) r.emplace(&sb.uses);
        y = m.blocks[1]->forward(x.detach().requires_grad_(true));
      }
      least = std::min(least, heap() - before);
      if (record) {
        EXPECT_EQ(sb.uses.size(), 4u) << "qkv, proj, fc, out";
      }
    }
    return least;
  };
  const double plain = kept(false), recorded = kept(true);
  // The records themselves (4 entries) are a few hundred bytes; one output is 32 kB.
  EXPECT_LT(recorded, plain + 4096) << "recorded " << recorded << " bytes, plain " << plain;
}

// A product's output gradient that autograd hands over as a slice of a larger buffer (a
// Llama's v: cat's backward slices the gradient of q, k and v, whose q and k parts the rotary
// backward copies) is kept as its own copy, not with the whole buffer until W.
TEST(SplitBackwardMemory, KeepsASliceNotItsWholeBuffer) {
  torch::manual_seed(5);
  const int64_t n = 64, d = 16;
  const torch::Tensor w1 = torch::randn({d, d}).requires_grad_(true);
  const torch::Tensor w2 = torch::randn({d, d}).requires_grad_(true);
  const torch::Tensor x = torch::randn({n, d});
  loom::model::SplitBackward sb;
  torch::Tensor loss;
  {
    loom::model::RecordLinearUses record(&sb.uses);
    const torch::Tensor y1 = loom::model::apply_linear(x, w1);
    const torch::Tensor y2 = loom::model::apply_linear(x, w2);
    const torch::Tensor both = torch::cat({y1 * 2, y2}, -1);  // y1's gradient: a new tensor
    loss = (both * both).sum();
  }
  ASSERT_EQ(sb.uses.size(), 2u);
  sb.input_grad(loss, torch::Tensor(), torch::Tensor(), {w1, w2});
  const int64_t block = n * d * 4;  // x, dy1, dy2: one [n, d] fp32 buffer each
  EXPECT_EQ(sb.held_bytes(), 3 * block) << "dy2 keeps cat's [n, 2d] gradient";
  sb.weight_grads();
  // The values are those of the fused backward.
  const torch::Tensor y1 = x.matmul(w1.t()), y2 = x.matmul(w2.t());
  EXPECT_TRUE(torch::allclose(w1.grad(), (8 * y1).t().matmul(x)));
  EXPECT_TRUE(torch::allclose(w2.grad(), (2 * y2).t().matmul(x)));
}

// After I, nothing the split keeps for W holds the stage's input: a recorded product input
// with its autograd history held the graph behind it, down to the input's accumulator, which
// holds the input (a received activation) until W.
TEST(SplitBackwardMemory, InputFreeAfterI) {
  for (Recompute recompute : {Recompute::None, Recompute::Full}) {
    SCOPED_TRACE(recompute == Recompute::None ? "no recomputation" : "full recomputation");
    loom::config::ModelConfig c = tiny(ModelKind::Gpt);
    Model m = loom::model::build(c, 7, {}, recompute);
    torch::Tensor input = torch::randn({2, c.seq_len, c.width}).requires_grad_(true);
    loom::model::SplitBackward sb;
    torch::Tensor out;
    {
      loom::model::RecordLinearUses record(&sb.uses);
      out = run(m, 1, input);  // the layers and the head
    }
    const torch::Tensor target = torch::randint(0, 256, {2, c.seq_len}, torch::kLong);
    const torch::Tensor dx =
        sb.input_grad(Model::loss(out, target), torch::Tensor(), input, params_of(m, 1));
    out = torch::Tensor();
    EXPECT_TRUE(dx.defined());
    EXPECT_EQ(input.use_count(), 1) << "the input is held beside this test's reference";
    sb.weight_grads();
  }
}

}  // namespace
