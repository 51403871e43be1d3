// The planner keeps only configurations under the memory limit, sorted by step time.
#include "loom/plan/planner.h"

#include <gtest/gtest.h>

#include <algorithm>

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

// A tied head: pipelines are searched with loom's copy on the last stage as with Megatron-LM's.
TEST(Planner, TiedHeadPipelinesSearched) {
  PlanRequest req = small_request();
  req.model.tied = true;
  req.dp_modes = {DpMode::AllReduce};
  auto pipelined = [](const PlanResult& r) {
    return std::any_of(r.ranked.begin(), r.ranked.end(),
                       [](const Candidate& k) { return k.par.pp > 1; });
  };
  EXPECT_TRUE(pipelined(plan(req, a100())));
  req.megatron = true;
  EXPECT_TRUE(pipelined(plan(req, a100())));
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

// One rank with one stage: zb-h1 is 1F1B's order (each backward split in two) and bfs GPipe's,
// so neither is searched beside its twin; alone, each still is.
TEST(Planner, OneRankOneStageSearchesNoTwins) {
  PlanRequest req = small_request();
  req.gpus = 4;
  req.global_batch = 8;
  req.dp_modes = {DpMode::AllReduce, DpMode::Zero3};
  req.memory_limit = 80e9;
  PlanResult r = plan(req, a100());
  int single = 0;
  for (const Candidate& k : r.ranked)
    if (k.par.pp == 1 && k.par.loops == 1) {
      ++single;
      EXPECT_NE(k.par.schedule, "zb-h1") << k.par.describe();
      EXPECT_NE(k.par.schedule, "bfs") << k.par.describe();
    }
  EXPECT_GT(single, 0);
  req.schedules = {"zb-h1", "bfs"};
  r = plan(req, a100());
  bool zb = false, bfs = false;
  for (const Candidate& k : r.ranked)
    if (k.par.pp == 1 && k.par.loops == 1) {
      zb = zb || k.par.schedule == "zb-h1";
      bfs = bfs || k.par.schedule == "bfs";
    }
  EXPECT_TRUE(zb);
  EXPECT_TRUE(bfs);
}

// The busiest rank's compute leaves out its tensor-parallel communication, which the exposed
// communication counts: the two add up to the step, not more.
TEST(Planner, ComputeLeavesTensorParallelCommToExposed) {
  Evaluation e;
  e.sim.ranks.resize(2);
  e.sim.ranks[0].compute_s = 3.71;
  e.sim.ranks[0].tp_comm_s = 0.31;
  e.sim.ranks[1].compute_s = 3.2;
  e.sim.step_s = 3.89;
  e.sim.ideal_step_s = 3.40;
  e.sim.exposed_comm_s = 0.49;
  const Candidate c = summarize(e);
  EXPECT_DOUBLE_EQ(c.compute_s, 3.40);
  EXPECT_DOUBLE_EQ(c.tp_comm_s, 0.31);
}

Candidate candidate(double step, double ideal, double bubble, double exposed, double compute) {
  Candidate c;
  c.par.dp = 2;
  c.par.pp = 2;
  c.par.schedule = "1f1b";
  c.step_s = step;
  c.ideal_step_s = ideal;
  c.bubble = bubble;
  c.exposed_s = exposed;
  c.compute_s = compute;
  c.peak_bytes = 10e9;
  return c;
}

// The gap to the winner is named by its largest part: with no bubble on either side, time
// idle beside the compute that is not a bubble (the optimizer) is not called one.
TEST(Planner, GapNamedByItsLargestPart) {
  PlanResult r;
  r.memory_limit = 80e9;
  r.ranked = {candidate(3.89, 3.40, 0, 0.49, 3.40), candidate(4.49, 3.70, 0, 0.79, 3.33)};
  r.ranked[1].par.dp_mode = DpMode::Zero3;
  std::string text = explain(r);
  EXPECT_NE(text.find("less exposed communication"), std::string::npos) << text;
  r.ranked[1] = candidate(4.27, 3.77, 0.1, 0.50, 3.33);
  text = explain(r);
  EXPECT_NE(text.find("smaller pipeline bubble"), std::string::npos) << text;
  r.ranked[1] = candidate(4.30, 3.80, 0, 0.50, 3.80);
  text = explain(r);
  EXPECT_NE(text.find("lighter compute"), std::string::npos) << text;
}

// A runner-up as fast as the winner is said to peak higher or lower only where the figures
// shown differ.
TEST(Planner, EqualPeaksReadTheSame) {
  PlanResult r;
  r.memory_limit = 80e9;
  r.ranked = {candidate(3.89, 3.40, 0, 0.49, 3.40), candidate(3.89, 3.40, 0, 0.49, 3.40)};
  r.ranked[1].peak_bytes += 1e6;  // 10.0 GB both
  EXPECT_NE(explain(r).find("peaks the same (10.0 GB)"), std::string::npos) << explain(r);
  r.ranked[1].peak_bytes = 12e9;
  EXPECT_NE(explain(r).find("peaks higher (12.0 GB vs 10.0 GB)"), std::string::npos) << explain(r);
}

}  // namespace
}  // namespace loom::plan
