// FusedAdamW against torch::optim::AdamW: same updates (to float rounding), same state, and
// checkpoints that load into either.
#include "loom/parallel/fused_adamw.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace {

std::vector<torch::Tensor> make_params() {
  torch::manual_seed(11);
  return {torch::randn({37, 5}), torch::randn({129}), torch::randn({1}), torch::randn({3, 4, 6})};
}

std::vector<torch::Tensor> clone_params(const std::vector<torch::Tensor>& ps) {
  std::vector<torch::Tensor> out;
  for (auto& p : ps) out.push_back(p.detach().clone().set_requires_grad(true));
  return out;
}

void set_grads(std::vector<torch::Tensor>& ps, int step) {
  torch::manual_seed(100 + step);
  for (auto& p : ps) p.mutable_grad() = torch::randn_like(p) * (step % 2 ? 1e-3 : 1.0);
}

// Steps [from, to) of several optimizers, each over its own parameters with the same gradients.
using Run = std::pair<torch::optim::Optimizer*, std::vector<torch::Tensor>*>;
void step_all(const std::vector<Run>& runs, int from, int to) {
  for (int step = from; step < to; ++step)
    for (const auto& [opt, ps] : runs) {
      set_grads(*ps, step);
      opt->step();
    }
}

// Largest per-tensor relative difference ||a - b|| / ||b||.
double max_rel(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i)
    d = std::max(d, (a[i] - b[i]).norm().item<double>() / b[i].norm().item<double>());
  return d;
}

TEST(FusedAdamW, MatchesTorchAdamW) {
  auto base = make_params();
  for (double wd : {0.0, 0.1}) {
    auto a = clone_params(base), b = clone_params(base);
    auto o = torch::optim::AdamWOptions(3e-3).betas({0.9, 0.95}).eps(1e-8).weight_decay(wd);
    loom::parallel::FusedAdamW fused(a, o);
    torch::optim::AdamW ref(b, o);
    step_all({{&fused, &a}, {&ref, &b}}, 0, 6);
    const double d = max_rel(a, b);
    std::printf("[ adamw ] weight decay %.1f: max relative difference to torch %.3g\n", wd, d);
    EXPECT_LT(d, 1e-6);
    EXPECT_GT(max_rel(a, base), 1e-3) << "the parameters must have moved";
  }
}

TEST(FusedAdamW, CheckpointsAreInterchangeableWithTorch) {
  auto base = make_params();
  auto o = torch::optim::AdamWOptions(1e-2).weight_decay(0.01);
  auto a = clone_params(base), b = clone_params(base);
  loom::parallel::FusedAdamW fused(a, o);
  torch::optim::AdamW ref(b, o);
  step_all({{&fused, &a}, {&ref, &b}}, 0, 3);
  // Fused state -> torch optimizer on the fused run's parameters; continue both for 3 steps.
  torch::serialize::OutputArchive out;
  fused.save(out);
  std::stringstream buf;
  out.save_to(buf);
  auto c = clone_params(std::vector<torch::Tensor>(a.begin(), a.end()));
  torch::optim::AdamW resumed(c, o);
  torch::serialize::InputArchive in;
  in.load_from(buf);
  resumed.load(in);
  step_all({{&fused, &a}, {&resumed, &c}, {&ref, &b}}, 3, 6);
  EXPECT_LT(max_rel(a, c), 1e-6);
  EXPECT_LT(max_rel(a, b), 1e-6);
}

// The GPU's path (ATen's multi-tensor fused kernel, one step count per group) run on CPU
// tensors, which that kernel also takes: the same updates as torch's AdamW, and a parameter
// without a gradient left alone, before a GPU ever runs it.
class DevicePathAdamW : public loom::parallel::FusedAdamW {
 public:
  using FusedAdamW::FusedAdamW;
  torch::Tensor step(LossClosure = nullptr) override {
    torch::NoGradGuard no_grad;
    step_on_device();
    return {};
  }
};

TEST(FusedAdamW, DevicePathMatchesTorchAdamW) {
  auto base = make_params();
  for (double wd : {0.0, 0.1}) {
    auto a = clone_params(base), b = clone_params(base);
    auto o = torch::optim::AdamWOptions(3e-3).betas({0.9, 0.95}).eps(1e-8).weight_decay(wd);
    DevicePathAdamW device_path(a, o);
    torch::optim::AdamW ref(b, o);
    step_all({{&device_path, &a}, {&ref, &b}}, 0, 6);
    // A step in which the last parameter has no gradient: it stays, the others move on.
    const torch::Tensor last = a.back().detach().clone();
    set_grads(a, 6);
    set_grads(b, 6);
    a.back().mutable_grad() = torch::Tensor();
    b.back().mutable_grad() = torch::Tensor();
    device_path.step();
    ref.step();
    EXPECT_TRUE(torch::equal(a.back(), last));
    const double d = max_rel(a, b);
    std::printf("[ adamw ] device path, weight decay %.1f: max relative difference %.3g\n", wd, d);
    EXPECT_LT(d, 1e-6);
    EXPECT_GT(max_rel(a, base), 1e-3) << "the parameters must have moved";
  }
}

TEST(FusedAdamW, NonContiguousParametersTakeTorchsPath) {
  auto big = torch::randn({6, 8});
  auto a = big.clone().t().set_requires_grad(true);  // non-contiguous leaf
  auto b = big.clone().t().set_requires_grad(true);
  ASSERT_FALSE(a.is_contiguous());
  auto o = torch::optim::AdamWOptions(1e-2);
  loom::parallel::FusedAdamW fused(std::vector<torch::Tensor>{a}, o);
  torch::optim::AdamW ref(std::vector<torch::Tensor>{b}, o);
  for (int step = 0; step < 3; ++step) {
    a.mutable_grad() = torch::ones_like(a) * (step + 1);
    b.mutable_grad() = torch::ones_like(b) * (step + 1);
    fused.step();
    ref.step();
  }
  EXPECT_TRUE(torch::equal(a, b));
}

}  // namespace
