// Tensor parallelism (model/tensor_parallel.h) gives the parameters of single-process training:
// every rank's parts equal the same parts (tp_shard) of the single-process parameters after 3
// AdamW steps, alone and composed with pipeline schedules and dp-modes; and after 3 SGD steps
// clipped by the global norm (AdamW hardly sees a uniform scale: SGD shows whether the norm
// counts the replicated parameters once).
#include "loom/model/tensor_parallel.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <optional>

#include "../parallel/sync_test_util.h"
#include "../support/shared_tmp.h"
#include "loom/common/error.h"
#include "loom/model/compute.h"
#include "loom/model/linear_uses.h"
#include "loom/model/split_products.h"
#include "loom/parallel/memory_tracker.h"

using namespace loom;

namespace {

struct Case {
  const char* name;
  int tp, dp, pp, loops;
  const char* schedule;
  const char* mode;
  const char* opt = "adamw";
  bool sp = false;  // sequence parallelism
  int ranks() const { return tp * dp * pp; }
};

// The matrix tp {1, 2} x sequence-parallel (tp 2) x pp {1, 2} x dp {1, 2} (world <= 4) x
// {1f1b, bfs (loops 2), zb-h1} (pp 2) x {allreduce, zero3} (dp 2) with AdamW, then SGD clipped
// by the global norm.
std::vector<Case> cases() {
  static std::vector<std::string> names;  // the cases point into it
  std::vector<Case> out;
  names.reserve(64);
  for (int tp : {1, 2})
    for (bool sp : {false, true}) {
      if (sp && tp == 1) continue;
      for (int pp : {1, 2})
        for (int dp : {1, 2}) {
          if (tp * pp * dp > 4) continue;
          for (const char* schedule : {"1f1b", "bfs", "zb-h1"}) {
            if (pp == 1 && std::string(schedule) != "1f1b") continue;
            for (const char* mode : {"allreduce", "zero3"}) {
              if (dp == 1 && std::string(mode) != "allreduce") continue;
              names.push_back(loom::detail::concat("tp", tp, sp ? "_sp" : "", "_pp", pp, "_dp", dp,
                                                   "_", schedule, "_", mode));
              for (char& ch : names.back())
                if (ch == '-') ch = '_';
              const int loops = std::string(schedule) == "bfs" ? 2 : 1;
              out.push_back({names.back().c_str(), tp, dp, pp, loops, schedule, mode, "adamw", sp});
            }
          }
        }
    }
  out.push_back({"tp2_dp2_zero1", 2, 2, 1, 1, "1f1b", "zero1"});
  out.push_back({"tp2_pp2_interleaved_loops2", 2, 1, 2, 2, "interleaved", "allreduce"});
  for (bool sp : {false, true}) {
    out.push_back({sp ? "sgd_clipped_tp2_sp" : "sgd_clipped_tp2", 2, 1, 1, 1, "1f1b", "allreduce",
                   "sgd", sp});
    out.push_back({sp ? "sgd_clipped_tp2_sp_pp2" : "sgd_clipped_tp2_pp2", 2, 1, 2, 1, "1f1b",
                   "allreduce", "sgd", sp});
    out.push_back({sp ? "sgd_clipped_tp2_sp_dp2_zero3" : "sgd_clipped_tp2_dp2_zero3", 2, 2, 1, 1,
                   "1f1b", "zero3", "sgd", sp});
  }
  return out;
}

config::Config configured(const Case& k, const std::string& dir) {
  config::Config c = test::tiny_config("gpt");
  c.train.steps = 3;
  c.train.optimizer = *config::parse_choice<config::Optimizer>(k.opt);
  c.train.lr = c.train.optimizer == config::Optimizer::Sgd ? 0.05 : 1e-3;
  c.train.momentum = 0.9;
  c.train.clip = 0.1;  // below the gradient norm of every step: the clipping acts
  test::set_layout(c, k.dp, k.pp, k.tp, k.loops, k.schedule, k.mode, k.pp * k.loops > 1 ? 4 : 2);
  c.parallel.sequence_parallel = k.sp;
  c.output.dir = dir;
  return c;
}

class TensorParallel : public ::testing::TestWithParam<Case> {};

TEST_P(TensorParallel, MatchesSingleProcess) {
  const Case k = GetParam();
  comm::Backend& w = comm::world();
  const std::string dir = test::shared_tmp(std::string("tp-") + k.name);
  if (k.ranks() > w.size()) GTEST_SKIP() << "needs " << k.ranks() << " ranks";
  const test::Params ref = test::trained_alone(
      configured({"one", 1, 1, 1, 1, "1f1b", "allreduce", k.opt}, ""), dir + "-ref");
  const bool in = w.rank() < k.ranks();
  auto sub = w.split(in ? 0 : 1, w.rank(), "tp");
  double diff = 0;
  int split = 0;
  if (in) {
    const int tp_rank = w.rank() % k.tp;  // the mesh puts a tensor-parallel group together
    test::Params got = train::Trainer(configured(k, dir), *sub).run().params;
    EXPECT_FALSE(got.empty());
    for (const auto& [name, t] : got) {
      const torch::Tensor want = model::tp_shard(name, ref.at(name), tp_rank, k.tp);
      ASSERT_EQ(t.sizes(), want.sizes()) << name;
      diff = std::max(
          diff, (t - want).norm().item<double>() / std::max(1e-12, want.norm().item<double>()));
      split += model::tp_split(name);
    }
    EXPECT_GT(split, 0);
  }
  w.all_reduce(&diff, 1, comm::DType::Float64, comm::ReduceOp::Max)->wait();
  if (w.rank() == 0)
    std::printf("[ tp ] %s: max relative difference %.3g (tolerance 1e-4)\n", k.name, diff);
  EXPECT_LE(diff, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(All, TensorParallel, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return std::string(info.param.name); });

// The vocabulary-parallel loss equals the cross entropy of the whole logits, and so do its
// gradients (each rank's columns).
TEST(VocabParallelLoss, EqualsCrossEntropyOfTheWholeLogits) {
  comm::Backend& w = comm::world();
  const int tp = std::min(2, w.size());
  const bool in = w.rank() < tp;
  auto group = w.split(in ? 0 : 1, w.rank(), "tp-loss");
  if (!in) return;
  torch::manual_seed(7);
  const torch::Tensor logits = torch::randn({3, 5, 8}) * 4;
  const torch::Tensor target = torch::randint(0, 8, {3, 5}, torch::kLong);
  torch::Tensor whole = logits.clone().requires_grad_(true);
  torch::Tensor expected = model::Model::loss(whole, target);
  expected.backward();
  torch::Tensor mine = logits.chunk(tp, -1)[w.rank()].clone().requires_grad_(true);
  torch::Tensor got = model::vocab_parallel_loss(mine, target, {tp, w.rank(), group.get()});
  got.backward();
  EXPECT_NEAR(got.item<double>(), expected.item<double>(), 1e-6);
  EXPECT_TRUE(torch::allclose(mine.grad(), whole.grad().chunk(tp, -1)[w.rank()], 1e-6, 1e-7));
}

// A row-parallel product's partial sums are summed where they lie (no copy: one [M, h] less
// at a recomputed layer's peak), and the sum and its gradient are those of a sum of copies.
TEST(ReduceFromTp, SumsInPlaceWithTheCopysGradients) {
  comm::Backend& w = comm::world();
  const int tp = std::min(2, w.size());
  const bool in = w.rank() < tp;
  auto group = w.split(in ? 0 : 1, w.rank(), "tp-sum");
  if (!in || tp < 2) return;
  const model::TensorParallel plain{tp, w.rank(), group.get()};
  torch::manual_seed(11 + w.rank());
  const torch::Tensor x = torch::randn({2, 3, 8}), wt = torch::randn({4, 8});
  const torch::Tensor weight = wt.clone().requires_grad_(true);
  const torch::Tensor y = model::apply_linear(x, weight);  // a product's own output
  const void* where = y.data_ptr();
  const torch::Tensor sum = model::leave_split(y, plain);
  EXPECT_EQ(sum.data_ptr(), where) << "the partial sums were copied";
  // The expected sum: every rank's product, added on this one.
  torch::Tensor expected = x.matmul(wt.t());
  group->all_reduce(expected)->wait();
  EXPECT_TRUE(torch::allclose(sum, expected, 1e-5, 1e-6));
  const torch::Tensor g = torch::randn_like(sum);
  sum.backward(g);
  EXPECT_TRUE(torch::allclose(weight.grad(), g.reshape({-1, 4}).t().matmul(x.reshape({-1, 8})),
                              1e-5, 1e-6));
}

// Sequence parallelism's products of one input (model/split_products.h) give the outputs and
// gradients of autograd's all-gather followed by the products, alone and through the split
// backward's I and W, in fp32 and under bf16 autocast; and they keep this rank's part of the
// input, where autograd keeps the gathered whole.
TEST(SplitProducts, EqualAutogradsAndKeepOnlyThisRanksPart) {
  comm::Backend& w = comm::world();
  const int tp = 2;
  const bool in = w.rank() < tp;
  auto group = w.split(in ? 0 : 1, w.rank(), "tp-products");
  if (!in || w.size() < tp) return;
  parallel::MemoryTracker::install();
  const model::TensorParallel sp{tp, w.rank(), group.get(), /*sequence=*/true};
  torch::manual_seed(11);
  const int64_t b = 2, s = 64, h = 64;
  const torch::Tensor whole = torch::randn({b, s, h});
  const torch::Tensor part = whole.chunk(tp, 1)[w.rank()].contiguous();
  std::vector<model::LinearWeights> weights = {
      {torch::randn({24, h}).requires_grad_(true), torch::randn({24}).requires_grad_(true)},
      {torch::randn({12, h}).requires_grad_(true), {}}};
  const std::vector<torch::Tensor> dys = {torch::randn({b, s, 24}), torch::randn({b, s, 12})};
  struct Grads {
    std::vector<torch::Tensor> ys, all;  // outputs; dx, then each weight's and bias's
  };
  // mode 0: autograd (enter_split, then the products); 1: split_products; 2: split_products
  // through the split backward (I, then W).
  auto forward = [&](int mode, const torch::Tensor& x) {
    if (mode != 0) return model::split_products(x, weights, sp);
    std::vector<torch::Tensor> ys;
    const torch::Tensor n = model::enter_split(x, sp);
    for (const auto& p : weights) ys.push_back(model::apply_linear(n, p.weight, p.bias));
    return ys;
  };
  // The bytes a forward's graph keeps: live with it and the outputs, less live once both are
  // gone, less the outputs (within a few hundred bytes that the communicator holds on to).
  auto kept = [&](int mode, bool bf16) {
    const torch::Tensor x = part.clone().requires_grad_(true);
    model::AutocastScope autocast(torch::kCPU, bf16);
    std::vector<torch::Tensor> ys = forward(mode, x);
    const int64_t with = parallel::MemoryTracker::live_bytes();
    int64_t outputs = 0;
    for (const auto& y : ys) outputs += y.numel() * y.element_size();
    ys.clear();
    return with - parallel::MemoryTracker::live_bytes() - outputs;
  };
  auto run = [&](int mode, bool bf16) {
    for (auto& p : weights) {
      p.weight.mutable_grad() = torch::Tensor();
      if (p.bias.defined()) p.bias.mutable_grad() = torch::Tensor();
    }
    const torch::Tensor x = part.clone().requires_grad_(true);
    Grads g;
    model::SplitBackward split;
    {
      model::AutocastScope autocast(torch::kCPU, bf16);
      std::optional<model::RecordLinearUses> recording;
      if (mode == 2) recording.emplace(&split.uses);
      g.ys = forward(mode, x);
    }
    torch::Tensor loss = torch::zeros({});
    for (size_t i = 0; i < g.ys.size(); ++i)
      loss = loss + (g.ys[i].to(torch::kFloat32) * dys[i]).sum();
    std::vector<torch::Tensor> params;
    for (const auto& p : weights) {
      params.push_back(p.weight);
      if (p.bias.defined()) params.push_back(p.bias);
    }
    if (mode == 2) {
      g.all.push_back(split.input_grad(loss, {}, x, params));
      split.weight_grads();
    } else {
      loss.backward();
      g.all.push_back(x.grad());
    }
    for (const auto& p : params) g.all.push_back(p.grad());
    for (auto& y : g.ys) y = y.detach();
    return g;
  };
  for (bool bf16 : {false, true}) {
    const Grads want = run(0, bf16);
    for (int mode : {1, 2}) {
      const Grads got = run(mode, bf16);
      const double tol = bf16 ? 1e-2 : 1e-5;
      for (size_t i = 0; i < want.ys.size(); ++i)
        EXPECT_TRUE(torch::allclose(got.ys[i].to(torch::kFloat32), want.ys[i].to(torch::kFloat32),
                                    tol, tol))
            << "output " << i << " mode " << mode << " bf16 " << bf16;
      ASSERT_EQ(got.all.size(), want.all.size());
      for (size_t i = 0; i < want.all.size(); ++i) {
        ASSERT_TRUE(got.all[i].defined()) << "gradient " << i << " mode " << mode;
        EXPECT_EQ(got.all[i].scalar_type(), want.all[i].scalar_type()) << i;
        EXPECT_TRUE(torch::allclose(got.all[i], want.all[i], tol, tol))
            << "gradient " << i << " mode " << mode << " bf16 " << bf16 << ": "
            << (got.all[i] - want.all[i]).abs().max().item<double>();
      }
    }
  }
  // fp32: the part is x itself (nothing new); autograd keeps the whole, b·s·h floats. bf16: the
  // part in bf16, where autograd keeps the whole in bf16 once per product (each casts it).
  const double slack = 1024, whole_values = double(b * s * h);
  EXPECT_NEAR(kept(1, false), 0, slack);
  EXPECT_NEAR(kept(0, false), whole_values * 4, slack);
  EXPECT_NEAR(kept(1, true), whole_values / tp * 2, slack);
  EXPECT_NEAR(kept(0, true), 2 * whole_values * 2, slack);
}

}  // namespace

namespace {

// The tensor-parallel bytes of one training step are those of docs/tensor-parallel.md: per
// micro-batch of b sequences of s tokens and width h, 4 all-reduces of b·s·h values per layer
// (g after attention and MLP in the forward, f before them in the backward), one for the
// embedding (g) and one for the head (f), and 3 of b·s values for the loss (max, sum of
// exponentials, target logit); ring all-reduce bytes 2 (T - 1) / T · n · 4.
TEST(TensorParallelBytes, MatchTheClosedForm) {
  comm::Backend& w = comm::world();
  const std::string dir = test::shared_tmp("tp-bytes");
  const int tp = 2;
  const bool in = w.rank() < tp;
  auto sub = w.split(in ? 0 : 1, w.rank(), "tp-bytes");
  if (!in || w.size() < tp) return;
  config::Config c = configured({"bytes", tp, 1, 1, 1, "1f1b", "allreduce"}, dir);
  const auto res = train::Trainer(c, *sub).run();
  const double m = double(c.train.microbatches), b = double(c.train.global_batch) / m,
               s = double(c.model.seq_len), h = double(c.model.width),
               layers = double(c.model.layers), ring = 2.0 * (tp - 1) / tp;
  const double values = m * ((4 * layers + 2) * b * s * h + 3 * b * s);
  EXPECT_EQ(res.tp_last_step.total_calls(), static_cast<uint64_t>(m * (4 * layers + 2 + 3)));
  EXPECT_DOUBLE_EQ(double(res.tp_last_step.total_bytes()), ring * values * 4);
}

// With sequence parallelism a stage sends its part of the sequence: the pipeline's bytes are
// 1/tp of those without it (activations forward, their gradients backward).
TEST(TensorParallelBytes, SequenceParallelCutsPipelineMessagesByTp) {
  comm::Backend& w = comm::world();
  const std::string dir = test::shared_tmp("tp-sp-bytes");
  const bool in = w.rank() < 4;
  auto sub = w.split(in ? 0 : 1, w.rank(), "tp-sp-bytes");
  if (!in || w.size() < 4) return;
  uint64_t bytes[2];
  for (bool sp : {false, true}) {
    config::Config c =
        configured({"sp-bytes", 2, 1, 2, 1, "1f1b", "allreduce"}, dir + (sp ? "-sp" : ""));
    c.parallel.sequence_parallel = sp;
    bytes[sp] = train::Trainer(c, *sub).run().pp_bytes;
  }
  EXPECT_GT(bytes[0], 0u);
  EXPECT_EQ(bytes[1] * 2, bytes[0]);
}

}  // namespace

namespace {

struct RecomputeCase {
  const char* name;
  int tp, dp, pp;
  const char* schedule;
  const char* mode;
  bool sp = false;
  int ranks() const { return tp * dp * pp; }
};

class Recomputation : public ::testing::TestWithParam<RecomputeCase> {};

// Recomputing (selective: the attention core; full: whole layers) runs the same operations on
// the same values again, so training gives bit-identical parameters, in every schedule
// (zero-bubble's W included) and with tensor parallelism; the activations kept between forward
// and backward shrink.
TEST_P(Recomputation, GivesTheParametersOfNoneAndKeepsLess) {
  const RecomputeCase k = GetParam();
  comm::Backend& w = comm::world();
  const std::string dir = test::shared_tmp(std::string("rc-") + k.name);
  if (k.ranks() > w.size()) GTEST_SKIP() << "needs " << k.ranks() << " ranks";
  const bool in = w.rank() < k.ranks();
  auto sub = w.split(in ? 0 : 1, w.rank(), "recompute");
  if (!in) return;
  std::map<std::string, train::TrainResult> runs;
  for (const char* how : {"none", "selective", "full"}) {
    config::Config c = configured({k.name, k.tp, k.dp, k.pp, 1, k.schedule, k.mode}, dir + how);
    c.model.seq_len = 64;  // attention scores worth recomputing
    c.parallel.recompute = *config::parse_choice<config::Recompute>(how);
    c.parallel.sequence_parallel = k.sp;
    runs[how] = train::Trainer(c, *sub).run();
  }
  for (const char* how : {"selective", "full"}) {
    for (const auto& [name, t] : runs["none"].params)
      EXPECT_TRUE(torch::equal(t, runs[how].params.at(name))) << how << " " << name;
    EXPECT_LT(runs[how].peak_activation_bytes, runs["none"].peak_activation_bytes) << how;
  }
  EXPECT_LT(runs["full"].peak_activation_bytes, runs["selective"].peak_activation_bytes);
  if (w.rank() == 0)
    std::printf("[ recompute ] %s: activations kept none %lld, selective %lld, full %lld bytes\n",
                k.name, static_cast<long long>(runs["none"].peak_activation_bytes),
                static_cast<long long>(runs["selective"].peak_activation_bytes),
                static_cast<long long>(runs["full"].peak_activation_bytes));
}

INSTANTIATE_TEST_SUITE_P(
    All, Recomputation,
    ::testing::Values(RecomputeCase{"one", 1, 1, 1, "1f1b", "allreduce"},
                      RecomputeCase{"pp2_zb_h1", 1, 1, 2, "zb-h1", "allreduce"},
                      RecomputeCase{"tp2_pp2_zb_h1", 2, 1, 2, "zb-h1", "allreduce"},
                      RecomputeCase{"tp2_dp2_zero3", 2, 2, 1, "1f1b", "zero3"},
                      RecomputeCase{"tp2_sp_pp2_zb_h1", 2, 1, 2, "zb-h1", "allreduce", true}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace

namespace {

// Slim-DP and the quantized all-reduce work on each tensor-parallel part as on a whole stage:
// degenerate Slim-DP (c + e = 1, a sync every step, plain SGD) equals allreduce under tp 2 x
// dp 2, and 8-bit quant stays within the bound of the quant tests (5% of the update).
TEST(TensorParallelDataParallel, SlimAndQuantPerPart) {
  comm::Backend& w = comm::world();
  config::Config c = test::tiny("gpt");  // collective on first use: before any return
  if (w.size() < 4) GTEST_SKIP() << "needs 4 ranks";
  test::set_layout(c, 2, 1, 2, 1, "1f1b", "slim", 1);
  c.slim.core = 0.7;  // c + e = 1, a sync every step: allreduce's parameters
  c.slim.explore = 0.3;
  c.slim.period = 1;
  auto [slim, ref] = test::train_and_allreduce(c, 4, "tp-slim");
  const double slim_diff = test::max_relative_diff(slim, ref);
  c.parallel.dp_mode = config::DpMode::Quant;
  c.quant.bits = 8;
  auto [quant, ref8] = test::train_and_allreduce(c, 4, "tp-quant");
  test::Params start = test::initial_params(c);
  for (auto& [name, t] : start) t = model::tp_shard(name, t, w.rank() % 2, 2);
  const double quant_diff = test::max_update_diff(quant, ref8, start);
  if (w.rank() == 0)
    std::printf(
        "[ tp ] slim c+e=1 vs allreduce %.3g; 8-bit quant vs allreduce %.3g of the update\n",
        slim_diff, quant_diff);
  EXPECT_LE(slim_diff, 1e-6);
  EXPECT_LE(quant_diff, 0.05);
  EXPECT_GT(quant_diff, 0.0);  // the quantization did act
}

}  // namespace
