// Products inside an autocast region (model/autocast_linear.h) against autocast's own: the same
// bf16 outputs, the gradients in the parameters' float32, with and without a bias, through
// apply_linear and the split backward; and the graph keeps the bf16 input, not a bf16 copy of
// the weight as autocast's product does. The softmax of bf16 scores (attention_core.h) against
// autograd's float32 softmax, keeping its bf16 output alone.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "loom/model/attention_core.h"
#include "loom/model/autocast_linear.h"
#include "loom/model/compute.h"
#include "loom/model/cpu_gemm.h"
#include "loom/model/linear_uses.h"
#include "loom/model/model.h"
#include "loom/parallel/memory_tracker.h"

namespace {

using loom::model::AutocastScope;
using loom::parallel::MemoryTracker;

struct Product {
  torch::Tensor y, dx, dw, db;
  int64_t kept = 0;  // bytes the graph holds once the autocast region is closed
};

// y = x w^T + b in an autocast region, through loom's linear() or autocast's own, then the
// backward of sum(y * dy).
Product product(bool loom, bool biased) {
  torch::manual_seed(5);
  const torch::Tensor x = torch::randn({4, 32, 64}).requires_grad_(true);
  const torch::Tensor w = torch::randn({48, 64}).requires_grad_(true);
  const torch::Tensor b = biased ? torch::randn({48}).requires_grad_(true) : torch::Tensor();
  const torch::Tensor dy = torch::randn({4, 32, 48});
  auto forward = [&] {
    AutocastScope autocast(torch::kCPU, true);
    return loom ? loom::model::linear(x, w, b) : torch::nn::functional::linear(x, w, b);
  };
  Product r;
  // The bytes the graph keeps (the autocast region closed: its cast cache is gone): live with
  // the output, less live without it, less the output.
  torch::Tensor y = forward();
  const int64_t with = MemoryTracker::live_bytes(), output = y.numel() * y.element_size();
  y = torch::Tensor();
  r.kept = with - MemoryTracker::live_bytes() - output;
  r.y = forward();
  (r.y.to(torch::kFloat32) * dy).sum().backward();
  r.y = r.y.detach();
  r.dx = x.grad();
  r.dw = w.grad();
  if (biased) r.db = b.grad();
  return r;
}

TEST(AutocastLinear, EqualsAutocastsProductAndKeepsNoWeightCopy) {
  MemoryTracker::install();
  for (bool biased : {true, false}) {
    const Product want = product(false, biased), got = product(true, biased);
    // Autocast's products differ by device (on the CPU it adds a bias in float32 after the
    // bf16 product; CUDA's product takes a bf16 bias): loom's is CUDA's form on every device.
    EXPECT_EQ(got.y.scalar_type(), torch::kBFloat16);
    EXPECT_TRUE(torch::allclose(got.y.to(torch::kFloat32), want.y.to(torch::kFloat32), 1e-2, 1e-2))
        << "biased " << biased;
    for (const auto& [g, w] : {std::pair{got.dx, want.dx}, {got.dw, want.dw}}) {
      EXPECT_EQ(g.scalar_type(), torch::kFloat32);
      EXPECT_TRUE(torch::allclose(g, w, 1e-2, 1e-2))
          << "biased " << biased << ": " << (g - w).abs().max().item<double>();
    }
    if (biased) {
      EXPECT_TRUE(torch::allclose(got.db, want.db, 1e-2, 1e-2));
    }
    // Autocast's graph: the bf16 input and the bf16 weight; loom's: the bf16 input alone.
    const int64_t input = 4 * 32 * 64 * 2, weight = 48 * 64 * 2;
    EXPECT_NEAR(double(want.kept), double(input + weight), 256) << "biased " << biased;
    EXPECT_NEAR(double(got.kept), double(input), 256) << "biased " << biased;
  }
}

// apply_linear records the bf16 input for zero-bubble's W (not the float32 x), and I then W
// give the fused backward's gradients.
TEST(AutocastLinear, SplitBackwardKeepsTheBf16Input) {
  torch::manual_seed(6);
  const torch::Tensor x = torch::randn({2, 16, 32}).requires_grad_(true);
  const torch::Tensor w = torch::randn({24, 32}).requires_grad_(true);
  const torch::Tensor b = torch::randn({24}).requires_grad_(true);
  loom::model::SplitBackward split;
  torch::Tensor y;
  {
    AutocastScope autocast(torch::kCPU, true);
    loom::model::RecordLinearUses record(&split.uses);
    y = loom::model::apply_linear(x, w, b);
  }
  ASSERT_EQ(split.uses.size(), 1u);
  EXPECT_EQ(split.uses[0].x.scalar_type(), torch::kBFloat16);
  const torch::Tensor loss = y.to(torch::kFloat32).pow(2).sum();
  const torch::Tensor dx = split.input_grad(loss, {}, x, {w, b});
  split.weight_grads();
  const torch::Tensor split_dw = w.grad().clone(), split_db = b.grad().clone();
  w.mutable_grad() = torch::Tensor();
  b.mutable_grad() = torch::Tensor();
  torch::Tensor fused;
  {
    AutocastScope autocast(torch::kCPU, true);
    fused = loom::model::apply_linear(x, w, b);
  }
  const auto grads = torch::autograd::grad({fused.to(torch::kFloat32).pow(2).sum()}, {x, w, b});
  EXPECT_TRUE(torch::equal(dx, grads[0]));
  EXPECT_TRUE(torch::allclose(split_dw, grads[1], 1e-3, 1e-3));
  EXPECT_TRUE(torch::equal(split_db, grads[2]));
}

// The probabilities of float32's softmax rounded to bf16; the gradient autograd gives through a
// float32 softmax and the cast (within bf16 rounding of the kept probabilities); nothing kept
// beyond the bf16 output, where autograd also keeps the float32 one.
TEST(SoftmaxKeptAs, Float32SoftmaxInBf16KeepingOnlyItsOutput) {
  MemoryTracker::install();
  torch::manual_seed(8);
  const torch::Tensor scores = (torch::randn({6, 32, 32}) * 3).requires_grad_(true);
  const torch::Tensor dy = torch::randn({6, 32, 32});
  torch::Tensor ours = loom::model::softmax_kept_as(scores, torch::kBFloat16);
  torch::Tensor autograds = scores.softmax(-1, torch::kFloat32).to(torch::kBFloat16);
  EXPECT_EQ(ours.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(ours, autograds));
  const auto g_ours = torch::autograd::grad({ours}, {scores}, {dy.to(torch::kBFloat16)})[0];
  const auto g_autograd =
      torch::autograd::grad({autograds}, {scores}, {dy.to(torch::kBFloat16)})[0];
  EXPECT_EQ(g_ours.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::allclose(g_ours, g_autograd, 2e-2, 2e-2))
      << (g_ours - g_autograd).abs().max().item<double>();
  // What each graph keeps: live with the output less live once it is gone, less the output.
  const int64_t values = 6 * 32 * 32;
  for (bool loom : {true, false}) {
    torch::Tensor y = loom ? loom::model::softmax_kept_as(scores, torch::kBFloat16)
                           : scores.softmax(-1, torch::kFloat32).to(torch::kBFloat16);
    const int64_t with = MemoryTracker::live_bytes();
    y = torch::Tensor();
    const int64_t held = with - MemoryTracker::live_bytes() - values * 2;
    EXPECT_NEAR(double(held), double(loom ? 0 : values * 4), 256) << "loom " << loom;
  }
  // The backward works in bf16 (float32 inside the kernel): beside the incoming bf16 gradient
  // it makes the bf16 scores' gradient and its float32 cast for the float32 scores, where
  // float32 copies of the probabilities and of both gradients took 12 bytes a score more.
  // The values agree with that float32 computation within bf16 rounding.
  torch::Tensor y = loom::model::softmax_kept_as(scores, torch::kBFloat16);
  const torch::Tensor dy16 = dy.to(torch::kBFloat16);
  const int64_t before = MemoryTracker::live_bytes();
  MemoryTracker::reset_peak();
  const torch::Tensor g = torch::autograd::grad({y}, {scores}, {dy16})[0];
  EXPECT_LE(MemoryTracker::peak_bytes() - before, values * (2 + 4) + 256);
  const torch::Tensor wide = torch::_softmax_backward_data(
      dy16.to(torch::kFloat32), y.to(torch::kFloat32), -1, torch::kFloat32);
  EXPECT_TRUE(torch::allclose(g, wide.to(torch::kBFloat16).to(torch::kFloat32), 0, 1e-2))
      << (g - wide).abs().max().item<double>();
}

// loom's cross entropy: libtorch's values and gradient, and a backward that makes one [N, C]
// gradient beside the kept logits (libtorch's kept log-softmax's output and held two more).
TEST(Loss, CrossEntropyMakesOneGradientOfTheLogits) {
  MemoryTracker::install();
  torch::manual_seed(9);
  const int64_t n = 96, classes = 512;
  const torch::Tensor logits = (torch::randn({4, n / 4, classes}) * 4).requires_grad_(true);
  const torch::Tensor target = torch::randint(0, classes, {4, n / 4}, torch::kLong);
  const torch::Tensor ours = loom::model::Model::loss(logits, target);
  const torch::Tensor theirs =
      torch::nn::functional::cross_entropy(logits.reshape({-1, classes}), target.reshape({-1}));
  EXPECT_NEAR(ours.item<double>(), theirs.item<double>(), 1e-6 * theirs.item<double>());
  const torch::Tensor g_ours = torch::autograd::grad({ours}, {logits})[0];
  const torch::Tensor g_theirs = torch::autograd::grad({theirs}, {logits})[0];
  EXPECT_LT((g_ours - g_theirs).abs().max().item<double>(), 1e-8);
  // The backward's bytes above what was live: one [N, C] float32 gradient (and small ones).
  const int64_t grad_bytes = n * classes * 4;
  torch::Tensor loss = loom::model::Model::loss(logits, target);
  const int64_t before = MemoryTracker::live_bytes();
  MemoryTracker::reset_peak();
  torch::autograd::grad({loss}, {logits});
  EXPECT_LE(MemoryTracker::peak_bytes() - before, grad_bytes + 4096);
  loss = torch::nn::functional::cross_entropy(logits.reshape({-1, classes}), target.reshape({-1}));
  const int64_t before_theirs = MemoryTracker::live_bytes();
  MemoryTracker::reset_peak();
  torch::autograd::grad({loss}, {logits});
  EXPECT_GE(MemoryTracker::peak_bytes() - before_theirs, 2 * grad_bytes);  // what it replaces
}

}  // namespace
