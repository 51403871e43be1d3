// --dp-mode quant on several ranks: a hand-computed two-rank exchange (the mean gradient, the
// error-feedback residual over two steps, the bytes), the stated bound against allreduce after
// 5 steps, and the mode per stage inside a pipeline.
#include <gtest/gtest.h>

#include <cmath>

#include "loom/parallel/quant_sync.h"
#include "loom/parallel/quantize.h"
#include "sync_test_util.h"

using namespace loom;

namespace {

// A block with one parameter of n values (its forward is never called here).
class Vec : public model::Block {
 public:
  explicit Vec(int64_t n) { w = register_parameter("w", torch::zeros({n})); }
  torch::Tensor forward(const torch::Tensor& x) override { return x * w.sum(); }
  double flops_per_sample() const override { return 4; }
  std::string kind() const override { return "vec"; }
  torch::Tensor w;
};

// QuantSync on world ranks 0 and 1 over one Vec; `sync` is null on the other ranks and on a
// world of one.
struct Pair {
  std::unique_ptr<comm::Backend> comm;
  std::shared_ptr<Vec> vec;
  std::unique_ptr<parallel::Stage> stage;
  std::unique_ptr<parallel::QuantSync> sync;
  explicit Pair(const config::Config& cfg, int64_t n = 4) : vec(std::make_shared<Vec>(n)) {
    comm::Backend& w = comm::world();
    if (w.size() < 2) return;
    const bool in = w.rank() < 2;
    comm = w.split(in ? 0 : 1, w.rank(), "pair");
    if (!in) return;
    stage =
        std::make_unique<parallel::Stage>(0, 1, std::vector<std::shared_ptr<model::Block>>{vec}, 0);
    sync =
        std::make_unique<parallel::QuantSync>(parallel::SyncContext{stage.get(), comm.get(), &cfg});
  }
  // One exchange of `grad` (into the stage's gradient, reduced, finished); the bytes it sent.
  uint64_t exchange(const torch::Tensor& grad) {
    vec->w.grad().copy_(grad);  // a view of the stage's gradient buffer
    const auto before = comm->stats();
    sync->reduce_grad();
    sync->finish_grad_sync();
    return (comm->stats() - before).total_bytes();
  }
};

// The tiny MLP's configuration with quant's bits and block size set.
config::Config quant_config(int64_t bits, int64_t block = 256) {
  config::Config cfg = test::tiny("mlp");
  cfg.quant.bits = bits;
  cfg.quant.block = block;
  return cfg;
}

// Ranks 0 and 1, 8 bits, blocks of 2; n = 4 values, so each rank owns a shard of 2.
// Every scale is a power of two, so each value below is exact:
//   rank 0: x = [7.9375, -1, 0.03, 3.96875]  scales 1/16, 1/32 -> codes [127, -16 | 1, 127]
//           sent [7.9375, -1 | 0.03125, 3.96875], residual [0, 0, 0.03 - 0.03125, 0]
//   rank 1: x = [-3.96875, 0.5, 0.5, 3.96875] scales 1/32, 1/32 -> exact, residual 0
//   shard 0 (rank 0): mean [1.984375, -0.25], scale 1/64 -> exact
//   shard 1 (rank 1): mean [0.265625, 3.96875], scale 1/32: 8.5 rounds away from zero to 9
//   mean gradient on both ranks: [1.984375, -0.25, 0.28125, 3.96875]
// Step 2 repeats the gradients: rank 0's x[2] = 0.03 + residual still quantizes to 0.03125 and
// leaves the residual (0.03 + (0.03 - 0.03125)) - 0.03125.
TEST(QuantSync, HandComputedExchangeAndErrorFeedback) {
  if (comm::world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const config::Config cfg = quant_config(8, 2);
  Pair two(cfg);
  if (!two.sync) return;  // ranks 2 and up
  const std::vector<float> grad = two.comm->rank() == 0
                                      ? std::vector<float>{7.9375f, -1.0f, 0.03f, 3.96875f}
                                      : std::vector<float>{-3.96875f, 0.5f, 0.5f, 3.96875f};
  const std::vector<float> mean = {1.984375f, -0.25f, 0.28125f, 3.96875f};
  const int64_t chunk = parallel::quant::encoded_bytes(2, {8, 2});  // 4 + 2 bytes
  for (int step = 0; step < 2; ++step) {
    // An all-to-all and an all-gather, each sending one quantized chunk to the other rank.
    EXPECT_EQ(two.exchange(torch::tensor(grad)), uint64_t(2 * chunk));
    auto g = two.vec->w.grad();
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(g[i].item<float>(), mean[i]) << "step " << step << " i " << i;
    std::vector<float> e(4, 0.0f);
    if (two.comm->rank() == 0) {
      const float e1 = 0.03f - 0.03125f;
      e[2] = step == 0 ? e1 : (0.03f + e1) - 0.03125f;
    }
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(two.sync->residual()[i], e[i]) << "step " << step << " i " << i;
    two.sync->after_step();  // zero the gradients
  }
}

// quant.gather_bits: the shards go in 2 bits, the mean in 8. Rank 0 sends [1, -1, 1, 1] and
// rank 1 [1, 1, -1, 1] (blocks of 2, scale 1: every value exact in 2 bits); the shard means
// [1, 0] and [0, 1] are exact in 8 bits too. The bytes: one 2-bit and one 8-bit chunk.
TEST(QuantSync, GatherInOtherBits) {
  if (comm::world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  config::Config cfg = quant_config(2, 2);
  cfg.quant.gather_bits = 8;
  Pair two(cfg);
  if (!two.sync) return;  // ranks 2 and up
  const uint64_t sent =
      two.exchange(two.comm->rank() == 0 ? torch::tensor({1.0f, -1.0f, 1.0f, 1.0f})
                                         : torch::tensor({1.0f, 1.0f, -1.0f, 1.0f}));
  const uint64_t two_bits = parallel::quant::encoded_bytes(2, {2, 2});    // 4 + 1 bytes
  const uint64_t eight_bits = parallel::quant::encoded_bytes(2, {8, 2});  // 4 + 2 bytes
  EXPECT_EQ(sent, two_bits + eight_bits);
  const std::vector<float> mean = {1.0f, 0.0f, 0.0f, 1.0f};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(two.vec->w.grad()[i].item<float>(), mean[i]) << "i " << i;
}

// quant.rms_clip reaches the error-fed shards: rank 0's shard [4, 1] is scaled to its RMS
// sqrt(8.5) (clip 1), so 4 is clipped to 3 s and the rest of it stays in the residual; its
// shard [-1, 1] has RMS 1 = its largest value and is sent exactly.
TEST(QuantSync, RmsClipScalesTheSentShards) {
  if (comm::world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  config::Config cfg = quant_config(3, 2);
  cfg.quant.rms_clip = 1;
  Pair two(cfg);
  if (!two.sync) return;  // ranks 2 and up
  two.exchange(torch::tensor({4.0f, 1.0f, -1.0f, 1.0f}));
  const float s = std::sqrt(8.5f) / 3.0f;
  const std::vector<float> e = {4.0f - 3 * s, 1.0f - s, 0.0f, 0.0f};  // 1 / s = 1.03: code 1
  for (int i = 0; i < 4; ++i) EXPECT_EQ(two.sync->residual()[i], e[i]) << "i " << i;
}

// quant.entropy changes the bytes, not the result: 4-bit codes of 4096 values per rank (products
// of two normal values: heavy-tailed, as gradients are) give the same mean and residual bit for
// bit as without it, over two steps (the second with error feedback), in fewer bytes.
TEST(QuantSync, EntropyCodingSendsFewerBytesForTheSameResult) {
  if (comm::world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  config::Config cfg = quant_config(4);
  constexpr int64_t n = 4096;
  struct Outcome {
    std::vector<float> mean, residual;
    uint64_t bytes = 0;
  };
  Outcome out[2];
  for (int coded = 0; coded < 2; ++coded) {
    cfg.quant.entropy = coded == 1;
    Pair two(cfg, n);         // every rank splits the world, twice
    if (!two.sync) continue;  // ranks 2 and up
    torch::manual_seed(11 + two.comm->rank());
    const torch::Tensor grad = torch::randn({n}) * torch::randn({n});
    for (int step = 0; step < 2; ++step) {
      out[coded].bytes += two.exchange(grad);
      const torch::Tensor g = two.vec->w.grad().contiguous();
      out[coded].mean.assign(g.data_ptr<float>(), g.data_ptr<float>() + n);
      out[coded].residual = two.sync->residual();
      two.sync->after_step();
    }
  }
  if (comm::world().rank() >= 2) return;
  if (comm::world().rank() == 0)
    std::printf("[ quant ] 4-bit entropy-coded: %llu bytes where plain codes take %llu\n",
                static_cast<unsigned long long>(out[1].bytes),
                static_cast<unsigned long long>(out[0].bytes));
  EXPECT_EQ(out[1].mean, out[0].mean);
  EXPECT_EQ(out[1].residual, out[0].residual);
  EXPECT_LT(out[1].bytes, out[0].bytes * 8 / 10) << out[1].bytes << " vs " << out[0].bytes;
  EXPECT_GT(out[1].bytes, out[0].bytes / 2) << out[1].bytes << " vs " << out[0].bytes;
}

// Stated bound: after 5 plain-SGD steps the parameters of quant-8bit differ from allreduce's by
// at most 5 % of the update allreduce made (||w_quant - w_allreduce|| / ||w_allreduce - w_0||,
// per tensor, max over tensors and ranks). Where the error comes from: each value is off by at
// most half a quantization step, 1/254 of its block's largest magnitude; the first
// quantization's errors do not add up over steps (error feedback sends them the next step), the
// re-quantization of the reduced shard is not fed back and adds up to 5 half-steps; relative to
// a coordinate's own update the error is large where the coordinate is much smaller than its
// block's maximum. Measured (this machine): 1.7-3.2 % with blocks of 256, less with smaller
// blocks; the bound leaves room for other platforms' rounding of the same computation.
constexpr double kQuantBound = 0.05;

struct BoundCase {
  std::string model;
  int dp, bits;
  int64_t block = 256;
};

class QuantBound : public ::testing::TestWithParam<BoundCase> {};

TEST_P(QuantBound, CloseToAllReduceAfterFiveSteps) {
  BoundCase k = GetParam();
  if (k.dp > comm::world().size()) GTEST_SKIP() << "needs " << k.dp << " ranks";
  config::Config c = test::tiny(k.model);
  c.train.steps = 5;
  c.parallel.dp = k.dp;
  c.parallel.dp_mode = config::DpMode::Quant;
  c.quant.bits = k.bits;
  c.quant.block = k.block;
  auto [quant, ref] = test::train_and_allreduce(c, k.dp, "quant-bound");
  double diff = test::max_update_diff(quant, ref, test::initial_params(c));
  if (comm::world().rank() == 0)
    std::printf(
        "[ quant ] %d-bit blocks of %lld, %s dp=%d: max ||w_q - w_ar|| / ||w_ar - w_0|| = %.3g\n",
        k.bits, static_cast<long long>(k.block), k.model.c_str(), k.dp, diff);
  if (k.bits == 8)
    EXPECT_LE(diff, kQuantBound);
  else
    EXPECT_LE(diff, 0.5);  // 4 bits: 1/14 of the block maximum per value; loose, reported
}

INSTANTIATE_TEST_SUITE_P(All, QuantBound,
                         ::testing::Values(BoundCase{"cnn", 2, 8}, BoundCase{"cnn", 4, 8},
                                           BoundCase{"gpt", 4, 8}, BoundCase{"cnn", 4, 8, 32},
                                           BoundCase{"cnn", 4, 4}),
                         [](const auto& info) {
                           return info.param.model + "_dp" + std::to_string(info.param.dp) +
                                  "_bits" + std::to_string(info.param.bits) + "_block" +
                                  std::to_string(info.param.block);
                         });

// The 6-layer GPT in quant mode on pp = 2 x dp = 2, 4 micro-batches of 4, 3 steps.
config::Config quant_pipeline(const std::string& schedule, int64_t loops) {
  config::Config c = test::tiny("gpt");
  c.model.layers = 6;
  c.train.steps = 3;
  c.parallel.pp = 2;
  c.parallel.dp = 2;
  c.parallel.loops = loops;
  c.parallel.schedule = schedule;
  c.train.microbatches = 4;
  c.train.global_batch = 16;
  c.parallel.dp_mode = config::DpMode::Quant;
  return c;
}

// Per stage inside a pipeline (pp = 2 x dp = 2): 1f1b, and bfs with two stages per rank.
class QuantPipeline : public ::testing::TestWithParam<std::pair<std::string, int>> {};

TEST_P(QuantPipeline, CloseToAllReduce) {
  auto [schedule, loops] = GetParam();
  if (comm::world().size() < 4) GTEST_SKIP() << "needs 4 ranks";
  config::Config c = quant_pipeline(schedule, loops);
  auto [quant, ref] = test::train_and_allreduce(c, 4, "quant-pipe");
  double diff = test::max_update_diff(quant, ref, test::initial_params(c));
  if (comm::world().rank() == 0)
    std::printf("[ quant ] pp=2 x dp=2 %s loops=%d: max ||w_q - w_ar|| / ||w_ar - w_0|| = %.3g\n",
                schedule.c_str(), loops, diff);
  EXPECT_LE(diff, kQuantBound);
}

INSTANTIATE_TEST_SUITE_P(All, QuantPipeline,
                         ::testing::Values(std::make_pair(std::string("1f1b"), 1),
                                           std::make_pair(std::string("bfs"), 2)),
                         [](const auto& info) { return info.param.first; });

// quant.entropy inside a pipeline whose ranks hold two stages each (bfs, loops 2): both stages'
// coded exchanges share the data-parallel communicator and its tags, in the same order on every
// rank; the parameters are those of the uncoded run, bit for bit.
TEST(QuantSync, EntropyCodingInAPipelineChangesNothing) {
  if (comm::world().size() < 4) GTEST_SKIP() << "needs 4 ranks";
  config::Config c = quant_pipeline("bfs", 2);
  c.quant.bits = 4;
  const test::Params plain = test::train_on(c, 4, "quant-ent-plain");
  c.quant.entropy = true;
  const test::Params coded = test::train_on(c, 4, "quant-ent-coded");
  ASSERT_EQ(plain.size(), coded.size());
  EXPECT_FALSE(plain.empty());
  for (const auto& [name, t] : plain) EXPECT_TRUE(torch::equal(t, coded.at(name))) << name;
}

// A run interrupted after the checkpoint of step 3 and resumed continues bit for bit
// (checkpoints carry the quant state: the error-feedback residual).
TEST(QuantSync, ResumeContinuesExactly) {
  config::Config c = test::tiny("cnn");
  c.parallel.dp_mode = config::DpMode::Quant;
  test::expect_resume_exact_after_3_of_6(c, "quant-resume");
}

}  // namespace
