// --dp-mode powersgd on several ranks: the exchange itself on a hand-made stage (full rank gives
// the mean gradient, low rank the same gradient on every replica and the closed-form bytes),
// full rank through the trainer equals allreduce (dp = 4, and pp = 2 x dp = 2), low rank keeps
// the replicas identical and learns, a stopped run resumes exactly, and before start_step the
// run is allreduce's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "loom/parallel/powersgd_sync.h"
#include "sync_test_util.h"

using namespace loom;

namespace {

// A block with a 6 x 5 matrix and a vector of 5 (its forward is never called here).
class Mat : public model::Block {
 public:
  Mat() {
    w = register_parameter("w", torch::zeros({6, 5}));
    b = register_parameter("b", torch::zeros({5}));
  }
  torch::Tensor forward(const torch::Tensor& x) override { return x.matmul(w) + b; }
  double flops_per_sample() const override { return 60; }
  std::string kind() const override { return "mat"; }
  torch::Tensor w, b;
};

// What an all-reduce of `floats` fp32 values sends from one rank of d (comm/backend.cpp).
uint64_t all_reduce_bytes(int64_t floats, int d) {
  return floats > 0 ? 2 * uint64_t(d - 1) * uint64_t(floats * 4) / uint64_t(d) : 0;
}

// Bytes one rank sends per compressed step: P's, Q's and the rest, one all-reduce each.
uint64_t step_bytes(const test::Params& params, int64_t rank, int d) {
  int64_t p = 0, q = 0, plain = 0;
  for (const auto& [name, t] : params) {
    const int64_t n = t.dim() >= 2 ? t.size(0) : 0, m = n > 0 ? t.numel() / n : 0;
    const int64_t r = std::min({rank, n, m});
    if (r > 0 && r * (n + m) < n * m) {
      p += n * r;
      q += m * r;
    } else {
      plain += t.numel();
    }
  }
  return all_reduce_bytes(p, d) + all_reduce_bytes(q, d) + all_reduce_bytes(plain, d);
}

// Three steps of the exchange on the Mat stage, each rank its own random gradients.
// rank 5 = min(6, 5) with every matrix compressed: P Q^T is the mean gradient, the errors sum
// to ~0 over the replicas.
// rank 1: the matrix is compressed (1 * 11 < 30); every replica gets the same gradient.
// Then a non-finite step, dropped.
TEST(PowerSgdSync, ExchangeOnAHandMadeStage) {
  comm::Backend& w = comm::world();
  const int d = w.size();
  if (d < 2) GTEST_SKIP() << "needs 2 ranks";
  for (const int64_t rank : {5, 1}) {
    config::Config cfg = test::tiny("mlp");
    cfg.powersgd.rank = rank;
    auto mat = std::make_shared<Mat>();
    parallel::Stage stage(0, 1, {mat}, 0);
    auto dp = w.split(0, w.rank(), "dp");
    parallel::SyncContext ctx{&stage, dp.get(), &cfg};
    parallel::PowerSgdSync sync(ctx, /*compress_all=*/rank == 5);
    ASSERT_EQ(sync.matrices().size(), 1u);
    EXPECT_EQ(sync.plain_numel(), 5);
    for (int step = 0; step < 3; ++step) {
      torch::manual_seed(100 * step + w.rank());
      const torch::Tensor gw = torch::randn({6, 5}), gb = torch::randn({5});
      mat->w.grad().copy_(gw);  // views of the stage's gradient buffer
      mat->b.grad().copy_(gb);
      torch::Tensor mean_w = gw.clone(), mean_b = gb.clone();
      w.all_reduce(mean_w)->wait();
      w.all_reduce(mean_b)->wait();
      mean_w /= d;
      mean_b /= d;
      const comm::Stats before = dp->stats();
      sync.reduce_grad();
      sync.finish_grad_sync();
      const uint64_t bytes = (dp->stats() - before).total_bytes();
      const int64_t r = std::min<int64_t>(rank, 5);
      EXPECT_EQ(bytes,
                all_reduce_bytes(6 * r, d) + all_reduce_bytes(5 * r, d) + all_reduce_bytes(5, d));
      EXPECT_EQ(sync.step_metrics()[0].second, double(bytes));
      EXPECT_TRUE(torch::allclose(mat->b.grad(), mean_b, 1e-6, 1e-6));
      const test::Params got = {{"w", mat->w.grad().clone()}, {"b", mat->b.grad().clone()}};
      EXPECT_EQ(test::spread_over_replicas(got), 0.0) << "rank " << rank << " step " << step;
      if (rank == 5) {
        const double rel =
            (mat->w.grad() - mean_w).norm().item<double>() / mean_w.norm().item<double>();
        EXPECT_LE(rel, 1e-5) << "step " << step;
        // e = M - P Q^T = M - mean(M): each replica's own deviation, summing to ~0.
        torch::Tensor e_sum = sync.error().clone();
        w.all_reduce(e_sum)->wait();
        EXPECT_LE(e_sum.abs().max().item<double>(), 1e-5) << "step " << step;
      } else {
        EXPECT_GT(sync.error().abs().max().item<double>(), 0.0);
      }
      sync.after_step();
    }
    // A non-finite step (train.on_nan = skip): e and Q start afresh, the next step is finite.
    mat->w.grad().fill_(std::nanf(""));
    sync.reduce_grad();
    sync.finish_grad_sync();
    sync.drop_step();
    sync.after_step();
    EXPECT_EQ(sync.error().abs().max().item<double>(), 0.0);
    torch::manual_seed(7 + w.rank());
    mat->w.grad().copy_(torch::randn({6, 5}));
    sync.reduce_grad();
    sync.finish_grad_sync();
    EXPECT_TRUE(torch::isfinite(mat->w.grad()).all().item<bool>()) << "rank " << rank;
    sync.after_step();
  }
}

config::Config adamw(int64_t rank) {
  config::Config c = test::tiny("gpt");
  c.train.optimizer = config::Optimizer::AdamW;
  c.train.lr = 1e-3;
  c.train.steps = 3;
  c.parallel.dp_mode = config::DpMode::PowerSgd;
  c.powersgd.rank = rank;
  return c;
}

// Full rank: no matrix pays for compression (r (n + m) >= n m when r = min(n, m)), so every
// gradient takes the uncompressed all-reduce: allreduce's mean, summed in another grouping.
TEST(PowerSgd, FullRankEqualsAllReduce) {
  const int ranks = comm::world().size();
  config::Config c = adamw(1 << 20);
  c.parallel.dp = ranks;
  auto [psgd, ref] = test::train_and_allreduce(c, ranks, "powersgd-full");
  const double diff = test::max_relative_diff(psgd, ref);
  if (comm::world().rank() == 0)
    std::printf("[ powersgd ] full rank, dp=%d: max relative difference to allreduce %.3g\n", ranks,
                diff);
  EXPECT_LE(diff, 1e-5);
}

TEST(PowerSgd, FullRankEqualsAllReduceInAPipeline) {
  if (comm::world().size() < 4) GTEST_SKIP() << "needs 4 ranks";
  config::Config c = adamw(1 << 20);
  test::set_layout(c, 2, 2, 1, 1, "1f1b", "powersgd", 2);
  auto [psgd, ref] = test::train_and_allreduce(c, 4, "powersgd-pp2");
  const double diff = test::max_relative_diff(psgd, ref);
  if (comm::world().rank() == 0)
    std::printf("[ powersgd ] full rank, pp=2 x dp=2: max relative difference to allreduce %.3g\n",
                diff);
  EXPECT_LE(diff, 1e-5);
}

// Rank 2: the bytes of the last step are the closed form, as the communicator counted them;
// every replica holds the same parameters; the loss is below the untrained one.
TEST(PowerSgd, LowRankBytesReplicasAndLoss) {
  const int ranks = comm::world().size();
  if (ranks < 2) GTEST_SKIP() << "needs 2 ranks";
  config::Config c = adamw(2);
  c.train.lr = 3e-3;
  c.train.steps = 5;
  c.parallel.dp = ranks;
  comm::Backend& w = comm::world();
  c.output.dir = test::shared_tmp("powersgd-low");
  auto sub = w.split(0, w.rank(), "train");
  const train::TrainResult res = train::Trainer(c, *sub).run();
  const uint64_t expect = step_bytes(test::initial_params(c), 2, ranks);
  const uint64_t full = all_reduce_bytes(
      [&] {
        int64_t n = 0;
        for (const auto& [k, t] : test::initial_params(c)) n += t.numel();
        return n;
      }(),
      ranks);
  if (w.rank() == 0)
    std::printf(
        "[ powersgd ] rank 2, dp=%d: %llu bytes per step (allreduce %llu, %.1f %%), "
        "compression %.3f, residual %.3f\n",
        ranks, static_cast<unsigned long long>(expect), static_cast<unsigned long long>(full),
        100.0 * double(expect) / double(full), res.sync_metrics.at("powersgd_compression.0"),
        res.sync_metrics.at("powersgd_residual.0"));
  EXPECT_EQ(res.sync_metrics.at("powersgd_bytes.0"), double(expect));
  EXPECT_EQ(res.dp_last_step.bytes[int(comm::OpKind::AllReduce)], expect);
  EXPECT_LT(expect, full / 2);
  EXPECT_EQ(test::spread_over_replicas(res.params), 0.0);

  config::Config still = c;
  still.train.lr = 1e-12;  // (about) the loss the run started from, on the same batches
  still.output.dir = test::shared_tmp("powersgd-still");
  const double untrained = train::Trainer(still, *sub).run().final_loss;
  if (w.rank() == 0)
    std::printf("[ powersgd ] loss after 5 steps %.4f, untrained %.4f\n", res.final_loss,
                untrained);
  EXPECT_LT(res.final_loss, untrained);
}

TEST(PowerSgd, ResumesExactly) {
  const int ranks = comm::world().size();
  if (ranks < 2) GTEST_SKIP() << "needs 2 ranks";
  for (const bool warm : {true, false}) {
    config::Config c = adamw(2);
    c.parallel.dp = ranks;
    c.powersgd.warm_start = warm;
    c.train.steps = 4;
    c.output.checkpoint_every = 2;
    test::expect_resume_exact(c, ranks, warm ? "powersgd-resume" : "powersgd-resume-cold", 2);
  }
}

// start_step = steps: every step is allreduce's (the same buckets), bit for bit.
TEST(PowerSgd, BeforeStartStepIsAllReduce) {
  const int ranks = comm::world().size();
  config::Config c = adamw(2);
  c.parallel.dp = ranks;
  c.powersgd.start_step = c.train.steps;
  auto [psgd, ref] = test::train_and_allreduce(c, ranks, "powersgd-late");
  for (const auto& [name, t] : psgd) EXPECT_TRUE(torch::equal(t, ref.at(name))) << name;
  // Its bytes are the buckets' all-reduces, as the communicator counted them.
  {
    comm::Backend& w = comm::world();
    config::Config one = c;
    one.output.dir = test::shared_tmp("powersgd-late-bytes");
    auto sub = w.split(0, w.rank(), "train");
    const train::TrainResult res = train::Trainer(one, *sub).run();
    const double all_reduce = double(res.dp_last_step.bytes[int(comm::OpKind::AllReduce)]);
    EXPECT_GT(all_reduce, 0.0);
    EXPECT_EQ(res.sync_metrics.at("powersgd_bytes.0"), all_reduce);
  }
  // And one step later compression begins: no longer the same.
  c.powersgd.start_step = c.train.steps - 1;
  auto [later, ref2] = test::train_and_allreduce(c, ranks, "powersgd-late2");
  EXPECT_GT(test::max_relative_diff(later, ref2), 0.0);
}

}  // namespace
