// loom profile's action cost (profile/action_cost.h): its two orders run the same work, so that
// their difference is the order's alone.
#include "loom/profile/action_cost.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "loom/config/config.h"

namespace {

using loom::profile::ActionJob;

// Every parameter gradient of the stack after one pass in the given order.
template <typename Pass>
std::vector<torch::Tensor> gradients_after(ActionJob& j, const loom::model::Model& m, Pass pass) {
  for (const auto& block : m.blocks)
    for (torch::Tensor& p : block->parameters()) p.mutable_grad() = torch::Tensor();
  pass(j);
  std::vector<torch::Tensor> g;
  for (loom::model::Block* layer : j.layers)
    for (const torch::Tensor& p : layer->parameters()) g.push_back(p.grad().clone());
  return g;
}

TEST(ActionCost, BothOrdersComputeTheSameGradients) {
  loom::config::ModelConfig c;
  c.width = 32;
  c.heads = 4;
  c.seq_len = 16;
  c.layers = 3;
  const loom::model::Model m = loom::model::build(c, 5);
  ActionJob j{2, {}, torch::randn({2, c.seq_len, c.width})};
  for (int l = 1; l <= 3; ++l) j.layers.push_back(m.blocks[l].get());
  const auto depth = gradients_after(j, m, loom::profile::depth_first_s);
  const auto breadth = gradients_after(j, m, loom::profile::breadth_first_s);
  ASSERT_EQ(depth.size(), breadth.size());
  ASSERT_GT(depth.size(), 3u);
  for (size_t i = 0; i < depth.size(); ++i) {
    EXPECT_TRUE(torch::allclose(depth[i], breadth[i], 1e-5, 1e-6)) << "parameter " << i;
    EXPECT_GT(depth[i].abs().sum().item<double>(), 0.0) << "parameter " << i;
  }
  // The embedding and head took no part.
  for (const torch::Tensor& p : m.blocks.front()->parameters()) EXPECT_FALSE(p.grad().defined());

  loom::profile::sample_action_cost(j, 0.0);  // the minimum: three pairs
  EXPECT_EQ(j.extra_s.size(), 3u);
  const double cost = loom::profile::action_cost_s(j);
  EXPECT_GE(cost, 0.0);
  EXPECT_TRUE(std::isfinite(cost));
}

}  // namespace
