// A head tied to the token embedding across pipeline stages (parallel/tied_head.h) gives the
// parameters of single-process training with the tie: the GPT (3 SGD steps) and the Llama
// (3 AdamW steps), with the head on another rank (1F1B, zb-h1's split backward, bfs and
// interleaved loops, tensor parallelism) or on the embedding's rank (zbv's and dualpipev's V,
// one rank with loops), under the dp-modes that hold the embedding differently (allreduce's
// buckets, zero1's shards, zero2's transient gradient, zero3's gathered weight). The evaluation
// after the last step sees the updated copy, and a run resumed from a checkpoint ends where the
// straight run does.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "../parallel/sync_test_util.h"

using namespace loom;

namespace {

constexpr int kMicro = 4;  // per replica and step

config::Config tied(const char* kind) {
  config::Config c = test::tiny_config("gpt");
  c.model.kind = *config::parse_choice<config::ModelKind>(kind);
  c.model.layers = 6;  // 8 blocks: up to 8 stages
  c.model.heads = 4;
  if (c.model.kind == config::ModelKind::Llama) c.model.kv_heads = 2;
  c.model.tie_embeddings = true;
  c.train.steps = 3;
  // The GPT's key biases get a gradient of rounding noise alone (the softmax is blind to them),
  // which AdamW scales up to ~1e-6 relative in any layout, tied or not: plain SGD for the GPT.
  c.train.optimizer =
      c.model.kind == config::ModelKind::Llama ? config::Optimizer::AdamW : config::Optimizer::Sgd;
  c.train.lr = c.model.kind == config::ModelKind::Llama ? 1e-3 : 0.05;
  return c;
}

struct Case {
  const char* name;
  const char* kind;
  int dp, pp, tp, loops;
  const char* schedule;
  const char* mode;
  int ranks() const { return dp * pp * tp; }
};

class TiedHead : public ::testing::TestWithParam<Case> {};

TEST_P(TiedHead, MatchesSingleProcess) {
  const Case k = GetParam();
  comm::Backend& w = comm::world();
  const std::string dir = test::shared_tmp(std::string("tied-") + k.name);
  config::Config c = tied(k.kind);
  const test::Params ref = test::single_process(c, dir + "-ref", int64_t(k.dp) * kMicro);
  test::set_layout(c, k.dp, k.pp, k.tp, k.loops, k.schedule, k.mode, kMicro);
  const test::Params got = test::train_on(c, k.ranks(), std::string("tied-") + k.name);
  const double diff = test::max_relative_diff_tp(got, ref, k.tp);
  if (w.rank() == 0)
    std::printf("[ tied ] %s: max relative difference %.3g (tolerance 1e-5)\n", k.name, diff);
  EXPECT_LE(diff, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, TiedHead,
    ::testing::Values(Case{"gpt_pp2_dp2_1f1b_allreduce", "gpt", 2, 2, 1, 1, "1f1b", "allreduce"},
                      Case{"gpt_pp2_dp2_zb_h1_zero3", "gpt", 2, 2, 1, 1, "zb-h1", "zero3"},
                      Case{"gpt_pp2_dp2_bfs_zero1", "gpt", 2, 2, 1, 2, "bfs", "zero1"},
                      Case{"gpt_pp4_interleaved", "gpt", 1, 4, 1, 2, "interleaved", "allreduce"},
                      Case{"gpt_pp2_dp2_zbv_zero3", "gpt", 2, 2, 1, 2, "zbv", "zero3"},
                      Case{"gpt_pp1_dp4_loops4_zero3", "gpt", 4, 1, 1, 4, "bfs", "zero3"},
                      Case{"gpt_tp2_pp2", "gpt", 1, 2, 2, 1, "1f1b", "allreduce"},
                      Case{"llama_pp2_dp2_1f1b_zero2", "llama", 2, 2, 1, 1, "1f1b", "zero2"},
                      Case{"llama_pp2_dp2_dualpipev", "llama", 2, 2, 1, 2, "dualpipev",
                           "allreduce"}),
    [](const auto& info) { return std::string(info.param.name); });

// bf16 (autocast over the fp32 copy, as over the embedding on one stage): the parameters of
// single-process bf16 training, far closer to them than bf16 is to fp32.
TEST(TiedHeadBf16, MatchesSingleProcessBf16) {
  config::Config c = tied("llama");
  c.train.precision = config::Precision::Bf16;
  const std::string dir = test::shared_tmp("tied-bf16");
  const test::Params ref = test::single_process(c, dir + "-ref", 2 * kMicro);
  config::Config fp32 = c;
  fp32.train.precision = config::Precision::Fp32;
  const test::Params ref32 = test::single_process(fp32, dir + "-ref32", 2 * kMicro);
  test::set_layout(c, 2, 2, 1, 1, "1f1b", "allreduce", kMicro);
  const test::Params got = test::train_on(c, 4, "tied-bf16");
  const double diff = test::max_relative_diff(got, ref);
  const double bf16_effect = test::max_relative_diff(ref, ref32);
  if (comm::world().rank() == 0)
    std::printf(
        "[ tied ] bf16 pp2_dp2: max relative difference %.3g (tolerance 1e-5); bf16 vs "
        "fp32 %.3g\n",
        diff, bf16_effect);
  EXPECT_LE(diff, 1e-5);
  EXPECT_GT(bf16_effect, 100 * diff);
}

// The last evaluation runs after the last optimizer step: the head's copy must be that step's.
TEST(TiedHeadEval, FinalEvaluationAsInOneProcess) {
  comm::Backend& w = comm::world();
  config::Config c = tied("gpt");
  c.train.final_eval = true;
  double want = 0;
  {
    config::Config one = c;
    test::set_layout(one, 1, 1, 1, 1, "1f1b", "allreduce", 2 * kMicro);
    auto self = w.split(w.rank(), 0, "self");
    one.output.dir = test::shared_tmp("tied-eval-ref") + std::to_string(w.rank());
    want = train::Trainer(one, *self).run().eval_loss;
  }
  test::set_layout(c, 2, 2, 1, 1, "1f1b", "allreduce", kMicro);
  c.output.dir = test::shared_tmp("tied-eval");
  const double got = train::Trainer(c, w).run().eval_loss;
  if (w.rank() == 0)
    std::printf("[ tied ] final evaluation loss %.7f, one process %.7f\n", got, want);
  EXPECT_TRUE(std::isfinite(want));
  EXPECT_NEAR(got, want, 1e-5 * std::abs(want));
}

// A resumed run refreshes the copy from the restored embedding: bit for bit the straight run.
TEST(TiedHeadResume, ExactAfterThreeOfSix) {
  config::Config c = tied("gpt");
  test::set_layout(c, 1, 2, 1, 1, "1f1b", "allreduce", kMicro);
  test::expect_resume_exact_after_3_of_6(c, "tied-resume");
}

}  // namespace
