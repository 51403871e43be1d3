// bf16 mixed precision (train.precision = bf16: autocast over fp32 master weights, fp32
// gradients and optimizer state) gives the parameters of single-process bf16 training: 3 AdamW
// steps of pipelines (1f1b, bfs, zb-h1) x dp-modes (allreduce, zero3) on 4 ranks against one
// process that runs the same micro-batches (so every matrix product has the shapes it has in
// the pipeline). What may differ is the order in which fp32 gradients are summed, so the
// tolerance is the fp32 tests' own. Gradients reduced in bf16 (parallel.grad_reduce) round
// each replica's gradient: compared with the update's size.
#include <gtest/gtest.h>

#include <cstdio>

#include "../parallel/sync_test_util.h"
#include "../support/shared_tmp.h"
#include "loom/common/error.h"
#include "loom/model/tensor_parallel.h"

using namespace loom;

namespace {

struct Case {
  const char* schedule;
  const char* mode;
  int loops;
};

constexpr int kDp = 2, kPp = 2, kMicro = 4;

config::Config bf16_run(const std::string& dir) {
  config::Config c = test::tiny_config("gpt");
  c.train.steps = 3;
  c.train.optimizer = config::Optimizer::AdamW;
  c.train.lr = 1e-3;
  c.train.precision = config::Precision::Bf16;
  c.output.dir = dir;
  return c;
}

// One process, every micro-batch of the global batch in turn (dp x m of them).
test::Params single_process(const config::Config& base, const std::string& dir) {
  return test::single_process(base, dir, kDp * kMicro);
}

class Bf16 : public ::testing::TestWithParam<Case> {};

TEST_P(Bf16, MatchesSingleProcessBf16) {
  const Case k = GetParam();
  const std::string name = loom::detail::concat(k.schedule, "-", k.mode);
  const std::string dir = test::shared_tmp("bf16-" + name);
  config::Config c = bf16_run(dir);
  const test::Params ref = single_process(c, dir + "-ref");
  config::Config fp32 = c;
  fp32.train.precision = config::Precision::Fp32;
  const test::Params ref32 = single_process(fp32, dir + "-fp32");
  test::set_layout(c, kDp, kPp, 1, k.loops, k.schedule, k.mode, kMicro);
  const test::Params got = test::train_on(c, kDp * kPp, "bf16-" + name);
  const test::Params mine = got.empty() ? test::Params{} : ref;
  const double diff = test::max_relative_diff(got, mine);
  // How far bf16 itself moves the parameters from fp32 training: the scale the difference
  // between two bf16 runs must stay far below.
  const double bf16_effect = test::max_relative_diff(ref, ref32);
  if (comm::world().rank() == 0)
    std::printf(
        "[ bf16 ] %s: max relative difference %.3g to single-process bf16 (tolerance "
        "1e-5); bf16 vs fp32 %.3g\n",
        name.c_str(), diff, bf16_effect);
  EXPECT_LE(diff, 1e-5);
  EXPECT_GT(bf16_effect, 100 * diff);  // the runs really computed in bf16
}

INSTANTIATE_TEST_SUITE_P(All, Bf16,
                         ::testing::Values(Case{"1f1b", "allreduce", 1}, Case{"1f1b", "zero3", 1},
                                           Case{"bfs", "allreduce", 2}, Case{"bfs", "zero3", 2},
                                           Case{"zb-h1", "allreduce", 1},
                                           Case{"zb-h1", "zero3", 1}),
                         [](const auto& info) {
                           std::string n =
                               loom::detail::concat(info.param.schedule, "_", info.param.mode);
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

// Tensor parallelism in bf16: each rank's partial products are rounded to bf16 (as in
// Megatron) where one process rounds the whole product once, so the two runs round in different
// places and differ by about as much as bf16 differs from fp32. What is asserted: tp=2 in bf16
// is as close to fp32 training as one process in bf16 is (within 2x), and tp=2 in fp32 equals
// one process. Under SGD: AdamW turns a tiny gradient whose sign a rounding flips into a full
// step the other way (a LayerNorm bias moved by 29% of its norm so), SGD keeps differences in
// proportion to the gradients'.
TEST(Bf16TensorParallel, CloseToSingleProcessBf16) {
  for (bool sp : {false, true}) {
    const std::string name = sp ? "tp2-sp" : "tp2";
    const std::string dir = test::shared_tmp("bf16-" + name);
    config::Config c = bf16_run(dir);
    c.train.optimizer = config::Optimizer::Sgd;
    c.train.lr = 0.05;
    comm::Backend& w = comm::world();
    const test::Params ref = test::single_process(c, dir + "-ref", 2);
    config::Config fp32 = c;
    fp32.train.precision = config::Precision::Fp32;
    const test::Params ref32 = test::single_process(fp32, dir + "-fp32", 2);
    test::set_layout(c, 1, 1, 2, 1, "1f1b", "allreduce", 2);
    c.parallel.sequence_parallel = sp;
    auto tp_diff = [&](const config::Config& run, const test::Params& want, const char* tag) {
      const test::Params got = test::train_on(run, 2, "bf16-" + name + tag);
      double diff = 0;
      for (const auto& [n, t] : got) {
        const torch::Tensor part = model::tp_shard(n, want.at(n), w.rank() % 2, 2);
        diff = std::max(diff, (t - part).norm().item<double>() / part.norm().item<double>());
      }
      w.all_reduce(&diff, 1, comm::DType::Float64, comm::ReduceOp::Max)->wait();
      return diff;
    };
    const double diff = tp_diff(c, ref, "");
    const double to_fp32 = tp_diff(c, ref32, "-again");
    config::Config c32 = c;
    c32.train.precision = config::Precision::Fp32;
    const double diff32 = tp_diff(c32, ref32, "-fp32");
    const double bf16_effect = test::max_relative_diff(ref, ref32);
    if (w.rank() == 0)
      std::printf(
          "[ bf16 tp ] %s: max relative difference to one process in fp32 %.3g (one "
          "process in bf16: %.3g); to one process in bf16 %.3g; tp=2 fp32 to one "
          "process fp32 %.3g\n",
          name.c_str(), to_fp32, bf16_effect, diff, diff32);
    EXPECT_LT(diff32, 1e-4) << name;
    EXPECT_LT(to_fp32, 2 * bf16_effect) << name;
  }
}

// Gradients reduced in bf16 (half the bytes: the communicator counts element sizes): each
// replica's gradient and each partial sum is rounded to bf16, and under AdamW a coordinate whose
// summed gradient changes sign moves the other way. The measure is what computing in bf16 does
// to the same run: reducing in bf16 must move the parameters less than that.
TEST(Bf16Reduction, MovesLessThanBf16Compute) {
  for (const char* mode : {"allreduce", "zero1", "zero3"}) {
    config::Config c = bf16_run(test::shared_tmp(std::string("bf16-reduce-") + mode));
    c.train.precision = config::Precision::Fp32;
    test::set_layout(c, 4, 1, 1, 1, "1f1b", mode, 2);
    const test::Params start = test::initial_params(c);
    const test::Params fp32 = test::train_on(c, 4, std::string("reduce32-") + mode);
    c.parallel.grad_reduce = config::Precision::Bf16;
    const test::Params reduced = test::train_on(c, 4, std::string("reduce16-") + mode);
    c.parallel.grad_reduce = config::Precision::Fp32;
    c.train.precision = config::Precision::Bf16;
    const test::Params computed = test::train_on(c, 4, std::string("compute16-") + mode);
    const double by_reduce = test::max_update_diff(reduced, fp32, start);
    const double by_compute = test::max_update_diff(computed, fp32, start);
    if (comm::world().rank() == 0)
      std::printf("[ bf16 reduce ] %s: parameters move %.3g of the update (bf16 compute: %.3g)\n",
                  mode, by_reduce, by_compute);
    EXPECT_LT(by_reduce, by_compute) << mode;
    EXPECT_GT(by_reduce, 0.0) << mode << ": bf16 reduction changed nothing";
  }
}

}  // namespace
