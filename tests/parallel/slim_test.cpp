// --dp-mode slim on several ranks: the degenerate case (c + e = 1, tau = 1, plain SGD) equals
// --dp-mode allreduce, alone and per stage inside a pipeline; the core set and the global copy
// are identical on every rank; bytes are |S| floats per sync as the ring formula counts them;
// the period and the full sync behave as documented.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "loom/data/rng.h"
#include "loom/parallel/optimizer.h"
#include "loom/parallel/slim_select.h"
#include "loom/parallel/slim_sync.h"
#include "sync_test_util.h"

using namespace loom;

namespace {

config::Config degenerate(const std::string& kind) {
  config::Config c = test::tiny(kind);
  c.parallel.dp_mode = config::DpMode::Slim;
  c.slim.core = 0.7;
  c.slim.explore = 0.3;
  c.slim.period = 1;
  c.slim.refresh = 2;
  return c;
}

// Trains `c` (degenerate slim) and the same run under allreduce on the first `ranks` ranks; the
// parameters must agree but for float rounding. `what` names the case in the printed line.
void expect_equals_allreduce(const config::Config& c, int ranks, const std::string& tag,
                             const std::string& what) {
  auto [slim, ref] = test::train_and_allreduce(c, ranks, tag);
  double diff = test::max_relative_diff(slim, ref);
  if (comm::world().rank() == 0)
    std::printf("[ slim ] %s: max relative difference to allreduce %.3g\n", what.c_str(), diff);
  EXPECT_LE(diff, 1e-6);
}

struct EqCase {
  std::string model;
  int dp, m;
};

class SlimDegenerate : public ::testing::TestWithParam<EqCase> {};

TEST_P(SlimDegenerate, EqualsAllReduce) {
  EqCase k = GetParam();
  if (k.dp > comm::world().size()) GTEST_SKIP() << "needs " << k.dp << " ranks";
  config::Config c = degenerate(k.model);
  c.parallel.dp = k.dp;
  c.train.microbatches = k.m;
  expect_equals_allreduce(
      c, k.dp, "slim-eq",
      "c+e=1 " + k.model + " dp=" + std::to_string(k.dp) + " m=" + std::to_string(k.m));
}

INSTANTIATE_TEST_SUITE_P(All, SlimDegenerate,
                         ::testing::Values(EqCase{"cnn", 2, 1}, EqCase{"cnn", 4, 1},
                                           EqCase{"gpt", 2, 2}, EqCase{"gpt", 4, 2}),
                         [](const auto& info) {
                           return info.param.model + "_dp" + std::to_string(info.param.dp) + "_m" +
                                  std::to_string(info.param.m);
                         });

// One SlimSync on the whole world, on an MLP stage whose gradients differ on every rank.
struct Direct {
  config::Config cfg;
  model::Model model;
  std::unique_ptr<parallel::Stage> stage;
  std::unique_ptr<parallel::SlimSync> sync;
  std::unique_ptr<parallel::StageOptimizer> opt;  // the trainer's part of the step

  explicit Direct(const config::SlimConfig& s) {
    cfg = test::tiny("mlp");
    cfg.model.width = 48;
    cfg.model.layers = 2;
    cfg.slim = s;
    model = model::build(cfg.model, cfg.train.seed);
    stage = std::make_unique<parallel::Stage>(0, 1, model.blocks, 0);
    parallel::SyncContext ctx{stage.get(), &comm::world(), &cfg};
    sync = std::make_unique<parallel::SlimSync>(ctx);
    opt = std::make_unique<parallel::StageOptimizer>(sync->optimized_params(), cfg.train);
  }
  // Rank- and step-dependent gradients, then one step.
  void step(int64_t t) {
    uint64_t state = data::detail::mix_seed(99 + t, comm::world().rank());
    for (auto& p : stage->params()) {
      auto g = torch::empty_like(p.tensor);
      float* d = g.data_ptr<float>();
      for (int64_t i = 0; i < g.numel(); ++i) d[i] = data::detail::normal(state);
      p.tensor.mutable_grad() = g;
    }
    sync->before_step();
    opt->step(0.05, 1.0);
    sync->after_step();
  }
};

uint64_t hash_floats(const std::vector<float>& v) {
  std::vector<int64_t> bits(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    int32_t b;
    std::memcpy(&b, &v[i], 4);
    bits[i] = b;
  }
  return parallel::slim::hash_indices(bits);
}

double metric(const parallel::SlimSync& s, const std::string& name) {
  for (auto& [k, v] : s.step_metrics())
    if (k == name) return v;
  ADD_FAILURE() << "no metric " << name;
  return -1;
}

TEST(SlimSync, CoreAndGlobalCopyIdenticalOnAllRanksAndBytesAreSFloats) {
  comm::Backend& w = comm::world();
  const int d = w.size();
  config::SlimConfig s;
  s.core = 0.2;
  s.explore = 0.1;
  s.refresh = 3;
  s.lambda = 1.0;
  Direct run(s);
  const int64_t n = run.sync->numel();
  const int64_t k = parallel::slim::fraction_count(0.2, n) + parallel::slim::fraction_count(0.1, n);
  uint64_t first_core = 0;
  bool core_moved = false;
  for (int64_t t = 0; t < 12; ++t) {
    auto before = w.stats();
    run.step(t);
    uint64_t sent = (w.stats() - before).total_bytes();
    EXPECT_EQ(static_cast<int64_t>(run.sync->last_selected().size()), k);
    EXPECT_EQ(sent, 2u * (d - 1) * uint64_t(k) * 4 / d) << "step " << t;
    EXPECT_EQ(metric(*run.sync, "slim_bytes"), double(sent));
    EXPECT_DOUBLE_EQ(metric(*run.sync, "slim_sync_fraction"), double(k) / n);
    // The core set and the global copy agree bit for bit across ranks (hash min == max).
    uint64_t core_hash = parallel::slim::hash_indices(run.sync->core());
    auto [clo, chi] = test::world_min_max(core_hash);
    EXPECT_EQ(clo, chi) << "core set differs across ranks at step " << t;
    auto [glo, ghi] = test::world_min_max(hash_floats(run.sync->global_params()));
    EXPECT_EQ(glo, ghi) << "global copy differs across ranks at step " << t;
    auto [slo, shi] = test::world_min_max(parallel::slim::hash_indices(run.sync->last_selected()));
    EXPECT_EQ(slo, shi) << "synchronized set differs across ranks at step " << t;
    if (t == 0) first_core = core_hash;
    core_moved |= core_hash != first_core;
  }
  EXPECT_EQ(run.sync->rounds(), 12);
  EXPECT_TRUE(core_moved) << "the core never changed in 4 refreshes";
  // Local coordinates outside S drift when dp > 1 (different gradients per rank).
  if (d > 1) {
    EXPECT_GT(metric(*run.sync, "slim_drift"), 0.0);
  }
}

TEST(SlimSync, PeriodAndFullSync) {
  comm::Backend& w = comm::world();
  config::SlimConfig s;
  s.core = 0.1;
  s.explore = 0.05;
  s.period = 2;
  s.full_sync = 2;
  Direct run(s);
  for (int64_t t = 0; t < 4; ++t) {
    auto before = w.stats();
    run.step(t);
    uint64_t sent = (w.stats() - before).total_bytes();
    double frac = metric(*run.sync, "slim_sync_fraction");
    if (t % 2 == 0) {  // no sync on the first step of each period
      EXPECT_EQ(sent, 0u);
      EXPECT_EQ(frac, 0.0);
    } else if (t == 1) {  // sync round 0: partial
      EXPECT_LT(frac, 0.2);
    } else {  // sync round 1: full (every F = 2 syncs), no drift left
      EXPECT_EQ(frac, 1.0);
      EXPECT_EQ(metric(*run.sync, "slim_drift"), 0.0);
      EXPECT_EQ(sent, 2u * (w.size() - 1) * uint64_t(run.sync->numel()) * 4 / w.size());
    }
  }
  EXPECT_EQ(run.sync->rounds(), 2);
}

// Per stage inside a pipeline: pp = 2 x dp = 2, 1f1b (one stage per rank) and bfs with two
// loops (two stages, two syncs on one rank's data-parallel communicator).
struct PipeCase {
  std::string schedule;
  int loops, m;
};

class SlimPipeline : public ::testing::TestWithParam<PipeCase> {};

TEST_P(SlimPipeline, DegenerateEqualsAllReduce) {
  PipeCase k = GetParam();
  if (comm::world().size() < 4) GTEST_SKIP() << "needs 4 ranks";
  config::Config c = degenerate("gpt");
  c.model.layers = 6;
  c.train.steps = 3;
  c.parallel.pp = 2;
  c.parallel.dp = 2;
  c.parallel.loops = k.loops;
  c.parallel.schedule = k.schedule;
  c.train.microbatches = k.m;
  c.train.global_batch = 2 * k.m * 2;
  expect_equals_allreduce(c, 4, "slim-pipe",
                          "pp=2 x dp=2 " + k.schedule + " loops=" + std::to_string(k.loops));
}

INSTANTIATE_TEST_SUITE_P(All, SlimPipeline,
                         ::testing::Values(PipeCase{"1f1b", 1, 4}, PipeCase{"bfs", 2, 3}),
                         [](const auto& info) { return info.param.schedule; });

// A small non-degenerate run through the trainer: it trains, and the metrics carry the report.
TEST(SlimSync, TrainsThroughTheTrainer) {
  int n = std::min(4, comm::world().size());
  config::Config c = test::tiny("cnn");
  c.parallel.dp_mode = config::DpMode::Slim;
  c.slim.core = 0.1;
  c.slim.explore = 0.05;
  c.train.steps = 4;
  auto p = test::train_on(c, n, "slim-train");
  if (comm::world().rank() < n) {
    for (auto& [name, t] : p) EXPECT_TRUE(torch::isfinite(t).all().item<bool>()) << name;
  }
  if (comm::world().rank() == 0) {
    std::ifstream f(test::shared_tmp("slim-train") + "/metrics.jsonl");
    std::string first;
    std::getline(f, first);
    for (const char* key : {"slim_bytes.0", "slim_sync_fraction.0", "slim_drift.0", "dp_bytes"})
      EXPECT_NE(first.find(key), std::string::npos) << key << " not in " << first;
  }
}

// A run interrupted after the checkpoint of step 3 and resumed continues bit for bit
// (checkpoints carry the slim state: g, u, the core set and the counters).
TEST(SlimSync, ResumeContinuesExactly) {
  config::Config c = test::tiny("cnn");
  c.parallel.dp_mode = config::DpMode::Slim;
  c.slim.core = 0.2;
  c.slim.explore = 0.1;
  c.slim.refresh = 2;
  test::expect_resume_exact_after_3_of_6(c, "slim-resume");
}

}  // namespace
