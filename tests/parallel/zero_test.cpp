// Sharded data parallelism (zero1/2/3) inside pipelines: equivalence with single-process
// training, exact resume, memory accounting and collective counts. 4 ranks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "../support/shared_tmp.h"
#include "../support/tiny_config.h"
#include "loom/comm/world.h"
#include "loom/schedule/generate.h"
#include "loom/schedule/lower.h"
#include "loom/train/trainer.h"
#include "sync_test_util.h"

using namespace loom;
using loom::test::shared_tmp;

namespace {

// 3 layers = 5 blocks, cut unevenly into 2 or 4 stages. Width 30 makes stage sizes that are
// not multiples of 4, so the flat buffers carry padding.
config::Config tiny_gpt() {
  config::Config c = loom::test::tiny_config("gpt");
  c.model.width = 30;
  c.train.steps = 3;
  c.train.microbatches = 4;
  c.train.optimizer = config::Optimizer::AdamW;
  c.train.lr = 1e-3;
  c.train.warmup = 1;
  c.train.clip = 1.0;
  c.output.dir = shared_tmp("zero-run");
  return c;
}

config::Config with(config::Config c, const std::string& mode, const std::string& schedule,
                    int dp) {
  c.parallel.dp = dp;
  c.parallel.pp = 4 / dp;
  c.parallel.schedule = schedule;
  c.parallel.loops = schedule == "interleaved" || schedule == "bfs" ? 2 : 1;
  c.parallel.dp_mode = *config::parse_choice<config::DpMode>(mode);
  return c;
}

// Runs on ranks [0, n) of the world; the other ranks return an empty result.
train::TrainResult train_on(const config::Config& c, int n, int64_t stop_after = -1) {
  comm::Backend& w = comm::world();
  bool in = w.rank() < n;
  auto sub = w.split(in ? 0 : 1, w.rank(), "zero");
  if (!in) return {};
  return train::Trainer(c, *sub).run(stop_after);
}

// Single-process parameters of tiny_gpt() (every rank computes them itself, once).
test::Params reference() {
  config::Config r = tiny_gpt();
  r.parallel = {};
  r.train.microbatches = 1;
  return test::trained_alone(r, r.output.dir + "-ref");
}

struct Case {
  std::string mode, schedule;
  int dp;
};

class ZeroEquivalence : public ::testing::TestWithParam<Case> {};

TEST_P(ZeroEquivalence, MatchesSingleProcess) {
  const Case k = GetParam();
  comm::Backend& w = comm::world();
  ASSERT_GE(w.size(), 4) << "run with 4 ranks";
  const test::Params ref = reference();
  train::TrainResult got = train_on(with(tiny_gpt(), k.mode, k.schedule, k.dp), 4);
  double diff = 0;
  for (auto& [name, t] : got.params) {
    auto it = ref.find(name);
    ASSERT_NE(it, ref.end()) << name;
    ASSERT_EQ(t.sizes(), it->second.sizes()) << name;
    diff = std::max(diff, (t - it->second).norm().item<double>() /
                              std::max(1e-12, it->second.norm().item<double>()));
  }
  if (w.rank() < 4) {
    EXPECT_FALSE(got.params.empty());
  }
  w.all_reduce(&diff, 1, comm::DType::Float64, comm::ReduceOp::Max)->wait();
  const double tol = 1e-4;
  if (w.rank() == 0)
    std::printf("[ zero  ] %s %s dp=%d pp=%d max relative difference %.3g (tolerance %.0e)\n",
                k.mode.c_str(), k.schedule.c_str(), k.dp, 4 / k.dp, diff, tol);
  EXPECT_LE(diff, tol);
}

std::vector<Case> cases() {
  std::vector<Case> v;
  for (std::string mode : {"zero1", "zero2", "zero3"})
    for (std::string sched : {"1f1b", "interleaved", "bfs"})
      for (int dp : {2, 4}) v.push_back({mode, sched, dp});
  // The other generators (zb-h1 splits B into I + W: weight gradients outside AccumulateGrad).
  for (std::string mode : {"zero1", "zero3"})
    for (std::string sched : {"gpipe", "zb-h1"}) v.push_back({mode, sched, 2});
  // Control: the same cases' difference under allreduce (float noise, not sharding).
  v.push_back({"allreduce", "bfs", 2});
  return v;
}

INSTANTIATE_TEST_SUITE_P(All, ZeroEquivalence, ::testing::ValuesIn(cases()), [](const auto& info) {
  const Case& k = info.param;
  std::string sched = k.schedule == "1f1b" ? "onef1b" : k.schedule == "zb-h1" ? "zbh1" : k.schedule;
  return k.mode + "_" + sched + "_dp" + std::to_string(k.dp);
});

// Interrupted after the checkpoint of step 3 and resumed: bit-identical to a straight run.
class ZeroResume : public ::testing::TestWithParam<std::string> {};

TEST_P(ZeroResume, ContinuesExactly) {
  config::Config c = with(tiny_gpt(), GetParam(), "bfs", 2);
  c.train.steps = 6;
  c.output.checkpoint_every = 3;
  config::Config straight = c;
  straight.output.dir += "-straight";
  auto ref = train_on(straight, 4).params;
  config::Config split = c;
  split.output.dir += "-split";
  train_on(split, 4, /*stop_after=*/3);
  config::Config resume = split;
  resume.output.resume = split.output.dir + "/checkpoint";
  train::TrainResult resumed = train_on(resume, 4);
  if (comm::world().rank() >= 4) return;
  EXPECT_EQ(resumed.steps, 3);
  ASSERT_EQ(ref.size(), resumed.params.size());
  for (auto& [name, t] : ref) ASSERT_TRUE(torch::equal(t, resumed.params.at(name))) << name;
}

INSTANTIATE_TEST_SUITE_P(Modes, ZeroResume, ::testing::Values("zero1", "zero2", "zero3"));

int64_t padded(int64_t n, int d) {
  return (n + d - 1) / d * d;
}

// Memory at dp = 4 (pp = 1, one stage per rank), from the modes' and optimizers' accounting.
// With P the stage's parameter count padded to a multiple of d, k = 2 AdamW values per
// parameter, 4 bytes:
//   allreduce  params P, grads P (buckets are ranges of it), optimizer kP  -> (2 + k) P
//   zero3      params P/d, grads P/d, optimizer kP/d (sharded, persistent) -> (2 + k) P / d
//              + working set W: the gathered parameters and the full gradient, P each at peak
// so zero3 <= allreduce / d + W + the padding's share of the state ((2 + k)(P - n) / d), with
// W = 2P here (one stage, gathered for F and B).
TEST(ZeroMemory, ShardedStateFallsAsOneOverDp) {
  const int d = 4;
  config::Config c = with(tiny_gpt(), "allreduce", "1f1b", d);
  auto all = train_on(c, 4);
  c.parallel.dp_mode = config::DpMode::Zero3;
  auto z3 = train_on(c, 4);
  if (comm::world().rank() >= 4) return;
  int64_t n = 0;
  for (auto& [name, t] : z3.params) n += t.numel();
  const int64_t P = padded(n, d) * 4;
  EXPECT_EQ(z3.memory.optimizer, 2 * P / d);
  EXPECT_EQ(z3.memory.working, 2 * P);
  EXPECT_EQ(z3.memory.total() - z3.memory.working, (2 + 2) * P / d);
  EXPECT_EQ(all.memory.total(), (2 + 2) * n * 4);
  EXPECT_LE(z3.memory.total(),
            all.memory.total() / d + z3.memory.working + (2 + 2) * (P - n * 4) / d);
  // The executor's concurrent peak of the working set cannot exceed the per-stage sum.
  EXPECT_GT(z3.peak_working_bytes, 0);
  EXPECT_LE(z3.peak_working_bytes, z3.memory.working);
  if (comm::world().rank() == 0)
    std::printf(
        "[ zero  ] dp=4 bytes per rank: allreduce %lld, zero3 %lld (sharded %lld + working %lld)\n",
        (long long)all.memory.total(), (long long)z3.memory.total(),
        (long long)(z3.memory.total() - z3.memory.working), (long long)z3.memory.working);
}

// UNSHARD actions of pipeline rank `pp_rank` in the lowered schedule of c.
int unshards(const config::Config& c, int pp_rank) {
  schedule::LowerOptions lo;
  lo.dp_mode = schedule::DpMode::ZeroParams;
  lo.reshard_after_forward = c.parallel.reshard_after_forward;
  lo.max_unsharded = static_cast<int>(c.parallel.max_unsharded);
  auto s = schedule::lower(
      schedule::generate(c.parallel.schedule,
                         {int(c.parallel.pp), int(c.parallel.loops), int(c.train.microbatches)}),
      lo);
  int n = 0;
  for (const auto& a : s.ranks[pp_rank]) n += a.kind == schedule::Kind::UNSHARD;
  return n;
}

struct Counted {
  uint64_t gathers, scatters, reduces, bytes;
  int64_t params;  // this rank's parameter count (all its stages)
  int64_t padded;  // the same, each stage padded to a multiple of dp
};

Counted count(const config::Config& c) {
  train::TrainResult r = train_on(c, 4);
  const auto& s = r.dp_last_step;
  Counted k{s.calls[int(comm::OpKind::AllGather)],
            s.calls[int(comm::OpKind::ReduceScatter)],
            s.calls[int(comm::OpKind::AllReduce)],
            s.total_bytes(),
            0,
            0};
  for (auto& [name, t] : r.params) k.params += t.numel();
  k.padded = r.memory.optimizer / 2 / 4 * c.parallel.dp;  // AdamW: 2 values per shard element
  return k;
}

TEST(ZeroComm, BreadthFirstGathersTwicePerStage) {
  comm::Backend& w = comm::world();
  config::Config c = with(tiny_gpt(), "zero3", "bfs", 2);  // pp 2, loops 2, m 4
  Counted k = count(c);
  if (w.rank() >= 4) return;
  const int d = 2, v = 2, pp_rank = w.rank() / d;
  EXPECT_EQ(unshards(c, pp_rank), 2 * v);
  EXPECT_EQ(k.gathers, uint64_t(2 * v));
  EXPECT_EQ(k.scatters, uint64_t(v));
  EXPECT_EQ(k.reduces, 0u);
  // 3 P (d-1)/d bytes, P in bytes; exact with the padded sizes, within padding of the formula.
  EXPECT_EQ(k.bytes, uint64_t(3 * k.padded * 4 * (d - 1) / d));
  EXPECT_NEAR(double(k.bytes), 3.0 * k.params * 4 * (d - 1) / d, 3.0 * v * 4 * (d - 1));
  if (w.rank() == 0)
    std::printf(
        "[ zero  ] bfs+zero3 rank 0: %llu all-gathers, %llu reduce-scatters, %llu bytes "
        "(3P(d-1)/d = %.0f)\n",
        (unsigned long long)k.gathers, (unsigned long long)k.scatters, (unsigned long long)k.bytes,
        3.0 * k.params * 4 * (d - 1) / d);
}

TEST(ZeroComm, KeepingParametersGatheredHalvesTheGathers) {
  comm::Backend& w = comm::world();
  config::Config c = with(tiny_gpt(), "zero3", "bfs", 2);
  c.parallel.reshard_after_forward = false;
  Counted k = count(c);
  if (w.rank() >= 4) return;
  EXPECT_EQ(unshards(c, w.rank() / 2), 2);
  EXPECT_EQ(k.gathers, 2u);
  EXPECT_EQ(k.scatters, 2u);
}

TEST(ZeroComm, InterleavedRegathersEveryVisit) {
  comm::Backend& w = comm::world();
  config::Config c = with(tiny_gpt(), "zero3", "interleaved", 2);
  c.train.microbatches = 8;  // m/pp = 4 visits per stage and phase
  c.train.global_batch = 32;
  Counted k = count(c);
  if (w.rank() >= 4) return;
  const int expected = unshards(c, w.rank() / 2);
  EXPECT_EQ(k.gathers, uint64_t(expected));
  EXPECT_GT(expected, 2 * 2);  // more than breadth-first's 2 per stage
  EXPECT_EQ(k.scatters, 2u);
  if (w.rank() == 0)
    std::printf(
        "[ zero  ] interleaved+zero3 m=8 rank 0: %llu all-gathers (lowered UNSHARDs %d), "
        "bfs would do 4\n",
        (unsigned long long)k.gathers, expected);
}

TEST(ZeroComm, Zero2ScattersGradientsAndGathersParametersOncePerStage) {
  comm::Backend& w = comm::world();
  config::Config c = with(tiny_gpt(), "zero2", "bfs", 2);
  Counted k = count(c);
  if (w.rank() >= 4) return;
  EXPECT_EQ(k.gathers, 2u);
  EXPECT_EQ(k.scatters, 2u);
  EXPECT_EQ(k.bytes, uint64_t(2 * k.padded * 4 / 2));  // 2 P (d-1)/d
}

}  // namespace
