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
    if (i) EXPECT_LE(r.ranked[i - 1].step_s, r.ranked[i].step_s);
  }
  EXPECT_NE(r.explanation.find("wins with"), std::string::npos);
  EXPECT_NE(r.explanation.find("runner-up"), std::string::npos);
  EXPECT_NE(format_table(r, 5).find(r.ranked[0].par.describe()), std::string::npos);
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

}  // namespace
}  // namespace loom::plan
