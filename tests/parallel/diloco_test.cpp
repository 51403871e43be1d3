// --dp-mode diloco on several ranks: the degenerate case (H = 1, outer lr 1, momentum 0, inner
// SGD) equals --dp-mode allreduce, alone and per stage inside a pipeline; after an outer step
// every replica holds the same parameters, between outer steps they differ; a run stopped
// between two outer steps resumes exactly.
#include <gtest/gtest.h>

#include <cstdio>

#include "sync_test_util.h"

using namespace loom;

namespace {

config::Config degenerate(const std::string& kind) {
  config::Config c = test::tiny(kind);  // plain SGD, constant learning rate
  c.parallel.dp_mode = config::DpMode::Diloco;
  c.diloco.inner_steps = 1;
  c.diloco.outer_lr = 1.0;
  c.diloco.outer_momentum = 0;
  return c;
}

TEST(Diloco, DegenerateEqualsAllReduce) {
  const int ranks = comm::world().size();
  for (const char* kind : {"gpt", "cnn"}) {
    config::Config c = degenerate(kind);
    c.parallel.dp = ranks;
    auto [diloco, ref] = test::train_and_allreduce(c, ranks, std::string("diloco-") + kind);
    const double diff = test::max_relative_diff(diloco, ref);
    if (comm::world().rank() == 0)
      std::printf("[ diloco ] %s, dp=%d: max relative difference to allreduce %.3g\n", kind, ranks,
                  diff);
    EXPECT_LE(diff, 1e-5) << kind;
  }
}

TEST(Diloco, DegenerateEqualsAllReduceInAPipeline) {
  if (comm::world().size() < 4) GTEST_SKIP() << "needs 4 ranks";
  config::Config c = degenerate("gpt");
  test::set_layout(c, 2, 2, 1, 1, "1f1b", "diloco", 2);
  auto [diloco, ref] = test::train_and_allreduce(c, 4, "diloco-pp2");
  const double diff = test::max_relative_diff(diloco, ref);
  if (comm::world().rank() == 0)
    std::printf("[ diloco ] pp=2 x dp=2: max relative difference to allreduce %.3g\n", diff);
  EXPECT_LE(diff, 1e-5);
}

// The largest difference between this rank's parameters and rank 0's, over the world.
double spread_over_replicas(const test::Params& mine) {
  double spread = 0;
  for (const auto& [name, t] : mine) {
    torch::Tensor first = t.contiguous().clone();
    comm::world().broadcast(first, 0)->wait();
    spread = std::max(spread, (t - first).abs().max().item<double>());
  }
  comm::world().all_reduce(&spread, 1, comm::DType::Float64, comm::ReduceOp::Max)->wait();
  return spread;
}

// AdamW inside, H = 3, the default outer Nesterov step, every rank a replica.
config::Config every_third_step() {
  config::Config c = test::tiny("gpt");
  c.train.optimizer = config::Optimizer::AdamW;
  c.train.lr = 1e-3;
  c.parallel.dp = comm::world().size();
  c.parallel.dp_mode = config::DpMode::Diloco;
  c.diloco.inner_steps = 3;
  return c;
}

TEST(Diloco, ReplicasMeetAtOuterSteps) {
  const int ranks = comm::world().size();
  if (ranks < 2) GTEST_SKIP() << "needs 2 ranks";
  config::Config c = every_third_step();
  c.train.steps = 6;  // ends on an outer step
  EXPECT_EQ(spread_over_replicas(test::train_on(c, ranks, "diloco-meet")), 0.0);
  c.train.steps = 5;  // two inner steps after the last outer step: each replica its own way
  EXPECT_GT(spread_over_replicas(test::train_on(c, ranks, "diloco-apart")), 0.0);
}

TEST(Diloco, ResumesExactlyBetweenOuterSteps) {
  const int ranks = comm::world().size();
  if (ranks < 2) GTEST_SKIP() << "needs 2 ranks";
  config::Config c = every_third_step();
  c.train.steps = 7;
  c.output.checkpoint_every = 4;  // one step after an outer step, two before the next
  test::expect_resume_exact(c, ranks, "diloco-resume", 4);
}

}  // namespace
