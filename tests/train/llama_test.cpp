// The Llama (model/llama.cpp: RMSNorm, rotary positions, grouped-query attention, SwiGLU) gives
// the parameters of single-process training, as the GPT does: 3 AdamW steps of pp=2 x dp=2
// under 1f1b, bfs (loops 2) and zb-h1 x allreduce and zero3; tensor parallelism (with and
// without sequence parallelism); flash attention; tied embeddings; and recomputation, which
// must not change a bit.
#include <gtest/gtest.h>

#include <cstdio>

#include "../parallel/sync_test_util.h"
#include "../support/shared_tmp.h"
#include "loom/common/error.h"

using namespace loom;

namespace {

constexpr int kMicro = 4;  // per replica and step

config::Config llama(const std::string& dir) {
  config::Config c = test::tiny_config("gpt");
  c.model.kind = config::ModelKind::Llama;
  c.model.heads = 4;
  c.model.kv_heads = 2;  // grouped: two query heads per key/value head
  c.train.steps = 3;
  c.train.optimizer = config::Optimizer::AdamW;
  c.train.lr = 1e-3;
  c.output.dir = dir;
  return c;
}

struct Case {
  const char* name;
  int dp, pp, tp, loops;
  const char* schedule;
  const char* mode;
  bool sp = false;
  bool flash = false;
  bool tied = false;
  int ranks() const { return dp * pp * tp; }
};

class Llama : public ::testing::TestWithParam<Case> {};

TEST_P(Llama, MatchesSingleProcess) {
  const Case k = GetParam();
  comm::Backend& w = comm::world();
  const std::string dir = test::shared_tmp(std::string("llama-") + k.name);
  config::Config c = llama(dir);
  c.model.attention = k.flash ? config::Attention::Flash : config::Attention::Standard;
  c.model.tie_embeddings = k.tied;
  // One process runs every replica's micro-batches in turn (the same products' shapes).
  const test::Params ref = test::single_process(c, dir + "-ref", int64_t(k.dp) * kMicro);
  test::set_layout(c, k.dp, k.pp, k.tp, k.loops, k.schedule, k.mode, kMicro);
  c.parallel.sequence_parallel = k.sp;
  const test::Params got = test::train_on(c, k.ranks(), std::string("llama-") + k.name);
  const double diff = test::max_relative_diff_tp(got, ref, k.tp);
  if (w.rank() == 0)
    std::printf("[ llama ] %s: max relative difference %.3g (tolerance 1e-5)\n", k.name, diff);
  EXPECT_LE(diff, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, Llama,
    ::testing::Values(Case{"pp2_dp2_1f1b_allreduce", 2, 2, 1, 1, "1f1b", "allreduce"},
                      Case{"pp2_dp2_1f1b_zero3", 2, 2, 1, 1, "1f1b", "zero3"},
                      Case{"pp2_dp2_bfs_allreduce", 2, 2, 1, 2, "bfs", "allreduce"},
                      Case{"pp2_dp2_bfs_zero3", 2, 2, 1, 2, "bfs", "zero3"},
                      Case{"pp2_dp2_zb_h1_allreduce", 2, 2, 1, 1, "zb-h1", "allreduce"},
                      Case{"pp2_dp2_zb_h1_zero3", 2, 2, 1, 1, "zb-h1", "zero3"},
                      Case{"tp2", 1, 1, 2, 1, "1f1b", "allreduce"},
                      Case{"tp2_sp", 1, 1, 2, 1, "1f1b", "allreduce", true},
                      Case{"tp2_pp2_1f1b", 1, 2, 2, 1, "1f1b", "allreduce"},
                      Case{"pp2_dp2_flash", 2, 2, 1, 1, "1f1b", "allreduce", false, true},
                      Case{"dp2_tied", 2, 1, 1, 1, "1f1b", "zero3", false, false, true}),
    [](const auto& info) { return std::string(info.param.name); });

// Recomputation runs the same operations again: the same parameters to the bit.
TEST(LlamaRecompute, BitIdentical) {
  const std::string dir = test::shared_tmp("llama-recompute");
  config::Config c = llama(dir);
  test::set_layout(c, 2, 2, 1, 1, "1f1b", "allreduce", kMicro);
  const test::Params none = test::train_on(c, 4, "llama-recompute-none");
  for (auto r : {config::Recompute::Selective, config::Recompute::Full}) {
    c.parallel.recompute = r;
    const test::Params again = test::train_on(c, 4, "llama-recompute-" + config::name_of(r));
    for (const auto& [name, t] : none)
      EXPECT_TRUE(torch::equal(t, again.at(name))) << config::name_of(r) << " " << name;
  }
}

}  // namespace
