// A recomputed layer's backward (model/transformer_parts.h): the gradients of the layer run
// without recomputation, and no more memory than they need.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "loom/model/transformer_parts.h"
#include "loom/parallel/memory_tracker.h"

namespace {

using loom::model::Part;
using loom::parallel::MemoryTracker;

// y = x w, elementwise: its backward keeps x and w, never y.
class Scale : public loom::model::RecomputableLayer {
 public:
  explicit Scale(int64_t n) : RecomputableLayer({}, loom::config::Recompute::Full) {
    w = register_parameter("w", torch::full({n}, 2.0));
  }
  torch::Tensor run(Part, const torch::Tensor& x) override { return x * w; }
  torch::Tensor decode(const torch::Tensor& x, loom::model::KvCache&) override { return x * w; }
  double flops_per_sample() const override { return 0; }
  std::string kind() const override { return "scale"; }
  torch::Tensor w;
};

TEST(Recomputed, BackwardDropsTheRecomputedOutput) {
  MemoryTracker::install();
  const int64_t n = 1 << 16, bytes = n * 4;
  auto layer = std::make_shared<Scale>(n);
  const torch::Tensor x = torch::randn({n}).requires_grad_(true);
  const torch::Tensor y = layer->forward(x);
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name(),
            "torch::autograd::CppNode<loom::model::(anonymous namespace)::Recomputed>")
      << "the layer was not recomputed";
  const torch::Tensor dy = torch::randn({n});
  const int64_t before = MemoryTracker::live_bytes();
  MemoryTracker::reset_peak();
  const auto g = torch::autograd::grad({y}, {x, layer->w}, {dy});
  // The recomputed x w goes before the backward runs: at most the two gradients at once (the
  // engine on the output held it to the end: three n-vectors).
  EXPECT_LE(MemoryTracker::peak_bytes() - before, 2 * bytes + 4096);
  EXPECT_TRUE(torch::equal(g[0], dy * 2));
  EXPECT_TRUE(torch::equal(g[1], dy * x));
}

}  // namespace
