// The planner keeps only configurations under the memory limit, sorted by step time.
#include "loom/plan/planner.h"

#include <gtest/gtest.h>

namespace loom::plan {
namespace {

Cluster a100() {
  return load_cluster(std::string(LOOM_CLUSTERS_DIR) + "/a100-80gb.toml");
}

PlanRequest small_request() {
  PlanRequest req;
  req.model = {24, 2048, 16, 2048, 51200, true};  // ~1.3B
  req.gpus = 16;
  req.global_batch = 64;
  req.micro_batches = {1, 2};
  req.loops = {1, 2};
  req.time_budget_s = 60;
  return req;
}

TEST(Planner, RankedUnderTheLimitAndSorted) {
  Cluster c = a100();
  PlanRequest req = small_request();
  req.memory_limit = 12e9;  // tight: forces drops
  PlanResult r = plan(req, c);
  ASSERT_FALSE(r.ranked.empty());
  EXPECT_GT(r.dropped_bound + r.over_memory, 0);
  EXPECT_EQ(r.simulated + r.dropped_bound + r.skipped_budget, r.enumerated);
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    EXPECT_LE(r.ranked[i].peak_bytes, 12e9) << r.ranked[i].par.describe();
    EXPECT_EQ(r.ranked[i].par.gpus(), 16);
    EXPECT_EQ(r.ranked[i].par.global_batch(), 64);
    if (i) {
      EXPECT_LE(r.ranked[i - 1].step_s, r.ranked[i].step_s);
    }
  }
  EXPECT_NE(r.explanation.find("wins with"), std::string::npos);
  EXPECT_NE(r.explanation.find("runner-up"), std::string::npos);
  EXPECT_NE(format_table(r, 5).find(r.ranked[0].par.describe()), std::string::npos);
}

// The table's columns line up whatever the length of the configurations shown.
TEST(Planner, TableColumnsLineUp) {
  PlanResult r;
  for (const char* schedule : {"1f1b", "interleaved"}) {
    Candidate c;
    c.par.dp = 4;
    c.par.pp = 8;
    c.par.tp = 2;
    c.par.schedule = schedule;
    c.par.loops = std::string(schedule) == "1f1b" ? 1 : 4;
    c.par.microbatches = 128;
    c.par.recompute = Recompute::Selective;
    c.par.sequence_parallel = std::string(schedule) != "1f1b";
    c.step_s = 31;
    r.ranked.push_back(c);
  }
  ASSERT_GT(r.ranked[1].par.describe().size(), 54u);  // wider than the old fixed column
  const std::string table = format_table(r, 2);
  std::vector<size_t> step_at;
  for (size_t at = 0; at < table.size();) {
    const size_t end = table.find('\n', at);
    const std::string line = table.substr(at, end - at);
    const bool header = !line.empty() && line.front() == '#';
    step_at.push_back(line.find(header ? "step" : "31 s"));
    at = end + 1;
  }
  ASSERT_EQ(step_at.size(), 3u);
  EXPECT_NE(step_at[0], std::string::npos);
  EXPECT_EQ(step_at[1], step_at[0]) << table;
  EXPECT_EQ(step_at[2], step_at[0]) << table;
}

// The planner searches the recomputation and attention variants it is given, and nothing
// else; without recomputation allowed a tighter limit drops more than with selective.
TEST(Planner, SearchesRecomputationAndAttention) {
  Cluster c = a100();
  PlanRequest req = small_request();
  req.memory_limit = 12e9;
  req.recompute = {Recompute::Selective};
  req.attention = {Attention::Standard, Attention::Flash};
  PlanResult r = plan(req, c);
  ASSERT_FALSE(r.ranked.empty());
  bool flash = false, standard = false;
  for (const Candidate& k : r.ranked) {
    // Flash with selective is skipped (nothing more to recompute).
    EXPECT_TRUE(k.par.attention == Attention::Standard && k.par.recompute == Recompute::Selective)
        << k.par.describe();
    standard = standard || k.par.attention == Attention::Standard;
  }
  EXPECT_TRUE(standard);
  req.recompute = {Recompute::None};
  PlanResult plain = plan(req, c);
  for (const Candidate& k : plain.ranked) {
    EXPECT_EQ(k.par.recompute, Recompute::None);
    flash = flash || k.par.attention == Attention::Flash;
  }
  EXPECT_TRUE(flash);
  // The distributed optimizer where zero1 runs on more than one replica; a layout with one
  // replica still runs once, without it.
  req.distributed_optimizer = {true};
  req.dp_modes = {DpMode::AllReduce, DpMode::Zero1};
  bool single = false;
  for (const Candidate& k : plan(req, c).ranked) {
    EXPECT_EQ(k.par.distributed_optimizer, k.par.dp > 1 && k.par.dp_mode == DpMode::Zero1)
        << k.par.describe();
    single = single || k.par.dp == 1;
  }
  EXPECT_TRUE(single);
}

// zbv is searched where it applies (loops 2, pp > 1), and its candidates are simulated in V
// placement: rank 0 holds the first and the last stage.
TEST(Planner, SearchesZbv) {
  PlanRequest req = small_request();
  req.schedules = {"zbv"};
  req.dp_modes = {DpMode::AllReduce};
  PlanResult r = plan(req, a100());
  ASSERT_FALSE(r.ranked.empty());
  for (const Candidate& k : r.ranked) {
    EXPECT_EQ(k.par.schedule, "zbv");
    EXPECT_EQ(k.par.loops, 2);
    EXPECT_GT(k.par.pp, 1);
    EXPECT_EQ(k.par.shape().placement, schedule::Placement::V);
  }
}

TEST(Planner, NothingFits) {
  Cluster c = a100();
  PlanRequest req = small_request();
  req.memory_limit = 1e6;
  PlanResult r = plan(req, c);
  EXPECT_TRUE(r.ranked.empty());
  EXPECT_NE(r.explanation.find("No configuration fits"), std::string::npos);
}

TEST(Planner, TimeBudgetStopsTheSearch) {
  Cluster c = a100();
  PlanRequest req = small_request();
  req.time_budget_s = 0;  // only the first candidate (checked before each simulation)
  PlanResult r = plan(req, c);
  EXPECT_LE(r.simulated, 1);
  EXPECT_GT(r.skipped_budget, 0);
}

// Loops without a pipeline are searched under zero3 only: there each stage is gathered on its
// own, so a model whose whole-stage gather does not fit can run layer by layer.
TEST(Planner, LoopsWithoutAPipelineOnlyUnderZero3) {
  Cluster c = a100();
  PlanRequest req = small_request();
  req.gpus = 4;
  req.global_batch = 8;
  req.loops = {1, 2, 4, 8};
  req.schedules = {"bfs", "1f1b"};
  req.dp_modes = {DpMode::AllReduce, DpMode::Zero2, DpMode::Zero3};
  req.recompute = {Recompute::Full};
  req.memory_limit = 80e9;
  PlanResult r = plan(req, c);
  ASSERT_FALSE(r.ranked.empty());
  bool looped_zero3 = false;
  for (const Candidate& k : r.ranked) {
    if (k.par.pp == 1 && k.par.loops > 1) {
      EXPECT_EQ(k.par.dp_mode, DpMode::Zero3) << k.par.describe();
      looped_zero3 = true;
    }
  }
  EXPECT_TRUE(looped_zero3);
  // Among the fitting ones, zero3 at dp 4 with 8 stages holds less than with one stage.
  auto peak = [&](int loops) {
    for (const Candidate& k : r.ranked)
      if (k.par.pp == 1 && k.par.tp == 1 && k.par.loops == loops &&
          k.par.dp_mode == DpMode::Zero3 && k.par.micro_batch == 1 && k.par.schedule == "bfs")
        return k.peak_bytes;
    return 0.0;
  };
  ASSERT_GT(peak(1), 0);
  ASSERT_GT(peak(8), 0);
  EXPECT_LT(peak(8), peak(1));
}

}  // namespace
}  // namespace loom::plan
