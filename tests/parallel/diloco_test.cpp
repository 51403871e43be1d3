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
  c.train.steps = 7;
  // Stopped (as if preempted) after an outer step, and two steps later: each replica its own way.
  EXPECT_EQ(test::spread_over_replicas(test::train_on(c, ranks, "diloco-meet", 6)), 0.0);
  EXPECT_GT(test::spread_over_replicas(test::train_on(c, ranks, "diloco-apart", 5)), 0.0);
  // At the end of the run the replicas take their mean: one model.
  c.train.steps = 5;
  EXPECT_EQ(test::spread_over_replicas(test::train_on(c, ranks, "diloco-end")), 0.0);
}

TEST(Diloco, ResumesExactlyBetweenOuterSteps) {
  const int ranks = comm::world().size();
  if (ranks < 2) GTEST_SKIP() << "needs 2 ranks";
  config::Config c = every_third_step();
  c.train.steps = 7;
  c.output.checkpoint_every = 4;  // one step after an outer step, two before the next
  test::expect_resume_exact(c, ranks, "diloco-resume", 4);
}

// ---- streaming-diloco

config::Config streaming(config::Config c, int64_t fragments, int64_t bits, int64_t overlap) {
  c.parallel.dp_mode = config::DpMode::StreamingDiloco;
  c.diloco.fragments = fragments;
  c.diloco.outer_bits = bits;
  c.diloco.overlap = overlap;
  return c;
}

// H = 1: every fragment meets after every step (offsets f * 1 / fragments = 0), each through
// an all-reduce of its own slice: the all-reduce step again.
TEST(StreamingDiloco, DegenerateEqualsAllReduce) {
  const int ranks = comm::world().size();
  config::Config c = streaming(degenerate("gpt"), 3, 32, 0);
  c.parallel.dp = ranks;
  auto [diloco, ref] = test::train_and_allreduce(c, ranks, "streaming-degenerate");
  const double diff = test::max_relative_diff(diloco, ref);
  if (comm::world().rank() == 0)
    std::printf(
        "[ streaming-diloco ] 3 fragments, dp=%d: max relative difference to allreduce %.3g\n",
        ranks, diff);
  EXPECT_LE(diff, 1e-5);
}

// 8-bit outer gradients in the degenerate case: the all-reduce step up to the quantization of
// the update (two roundings of a blockwise 8-bit code, no error feedback: 4 % measured).
TEST(StreamingDiloco, QuantizedOuterGradientStaysCloseToAllReduce) {
  const int ranks = comm::world().size();
  if (ranks < 2) GTEST_SKIP() << "needs 2 ranks";
  config::Config c = streaming(degenerate("gpt"), 2, 8, 0);
  c.parallel.dp = ranks;
  const test::Params start = test::initial_params(c);
  auto [quantized, ref] = test::train_and_allreduce(c, ranks, "streaming-8bit");
  const double diff = test::max_update_diff(quantized, ref, start);
  if (comm::world().rank() == 0)
    std::printf(
        "[ streaming-diloco ] 8-bit outer gradients: |update - allreduce's| / |allreduce's "
        "update| = %.3g (worst tensor)\n",
        diff);
  EXPECT_GT(diff, 0.0);  // it is quantized
  EXPECT_LE(diff, 0.05);
}

// Parameters the replicas hold identically (to the last bit), and all of them.
std::pair<int, int> identical_over_replicas(const test::Params& mine) {
  int same = 0;
  for (const auto& [name, t] : mine) {
    torch::Tensor first = t.contiguous().clone();
    comm::world().broadcast(first, 0)->wait();
    double d = (t - first).abs().max().item<double>();
    comm::world().all_reduce(&d, 1, comm::DType::Float64, comm::ReduceOp::Max)->wait();
    same += d == 0;
  }
  return {same, int(mine.size())};
}

// Two fragments, H = 4: fragment 0 meets after steps 4, 8, ..., fragment 1 after 2, 6, ...;
// after step 4 the replicas share fragment 0's parameters but not fragment 1's.
TEST(StreamingDiloco, FragmentsMeetOnStaggeredSteps) {
  const int ranks = comm::world().size();
  if (ranks < 2) GTEST_SKIP() << "needs 2 ranks";
  config::Config c = streaming(every_third_step(), 2, 32, 0);
  c.diloco.inner_steps = 4;
  c.train.steps = 5;  // stopped after step 4, before the end of the run
  auto [same, all] = identical_over_replicas(test::train_on(c, ranks, "streaming-stagger", 4));
  EXPECT_GT(same, 0);
  EXPECT_LT(same, all);
  c.diloco.fragments = 1;  // plain DiLoCo: everything met after step 4
  std::tie(same, all) = identical_over_replicas(test::train_on(c, ranks, "streaming-one", 4));
  EXPECT_EQ(same, all);
}

// 4-bit outer gradients overlapped with one inner step: a checkpoint after step 4 holds
// fragment 0's exchange in flight (started after step 4, applied after step 5).
TEST(StreamingDiloco, ResumesExactlyWithAnExchangeInFlight) {
  const int ranks = comm::world().size();
  if (ranks < 2) GTEST_SKIP() << "needs 2 ranks";
  config::Config c = streaming(every_third_step(), 2, 4, 1);
  c.diloco.inner_steps = 4;
  c.train.steps = 7;
  c.output.checkpoint_every = 4;
  test::expect_resume_exact(c, ranks, "streaming-resume", 4);
}

}  // namespace
