// A checkpoint written in the background (output.async_save): each rank holds a copy of the
// state a save copies (the parameters its optimizer updates, their optimizer state) while the
// next steps train. On a shared (CPU) cluster it is in the peak; on a GPU cluster it is host
// memory, reported apart, and the device's peak does not move.
#include <gtest/gtest.h>

#include "loom/plan/evaluate.h"
#include "loom/plan/planner.h"
#include "loom/plan/transformer.h"

namespace loom::plan {
namespace {

const Transformer kModel{4, 128, 4, 64, 256, false};

Evaluation run(const Cluster& c, DpMode mode, int dp, int pp, bool async_save) {
  Parallel p;
  p.dp = dp;
  p.pp = pp;
  p.microbatches = 4;
  p.micro_batch = 2;
  p.dp_mode = mode;
  EvalOptions o;
  o.precision = "fp32";
  o.async_save = async_save;
  return evaluate(kModel, p, c, o);
}

// Each rank's copy, by hand: fp32 parameters (4 bytes) and AdamW's two moments (8), of the
// parameters its optimizer updates: its stages' whole (allreduce) or a 1/dp shard (zero).
TEST(AsyncSave, TheCopyIsTheStateASaveWritesInTheSharedClustersPeak) {
  const Cluster cpu = load_cluster(std::string(LOOM_CLUSTERS_DIR) + "/this-machine.toml");
  ASSERT_TRUE(cpu.shared);
  const double P = total_params(kModel);
  for (auto [mode, dp] : {std::pair{DpMode::AllReduce, 1}, std::pair{DpMode::Zero1, 2},
                          std::pair{DpMode::Zero2, 2}, std::pair{DpMode::Zero3, 2}}) {
    const Evaluation without = run(cpu, mode, dp, 1, false), with = run(cpu, mode, dp, 1, true);
    const double copy = P / dp * (4 + 8);
    EXPECT_NEAR(with.sim.ranks[0].peak.snapshot, copy, 1e-6 * P) << dp;
    EXPECT_NEAR(with.sim.peak_memory() - without.sim.peak_memory(), copy, 1e-6 * P) << dp;
    EXPECT_EQ(without.sim.ranks[0].peak.snapshot, 0);
    EXPECT_EQ(with.sim.ranks[0].host_snapshot, 0);
    EXPECT_DOUBLE_EQ(with.sim.step_s, without.sim.step_s);  // the copy costs no step time here
  }
  // On a pipeline each rank copies its own stages: the copies add up to the whole state.
  const Evaluation pp = run(cpu, DpMode::AllReduce, 1, 2, true);
  EXPECT_NEAR(pp.sim.ranks[0].peak.snapshot + pp.sim.ranks[1].peak.snapshot, P * 12, 1e-6 * P);
  EXPECT_GT(pp.sim.ranks[1].peak.snapshot, 0);
  EXPECT_NE(format_breakdown(pp).find("an async save's copy"), std::string::npos);
}

TEST(AsyncSave, OnAGpuClusterTheCopyIsHostMemory) {
  const Cluster gpu = load_cluster(std::string(LOOM_CLUSTERS_DIR) + "/h200.toml");
  ASSERT_FALSE(gpu.shared);
  const double P = total_params(kModel);
  const Evaluation without = run(gpu, DpMode::Zero3, 2, 1, false);
  const Evaluation with = run(gpu, DpMode::Zero3, 2, 1, true);
  EXPECT_DOUBLE_EQ(with.sim.peak_memory(), without.sim.peak_memory());
  EXPECT_NEAR(with.sim.ranks[0].host_snapshot, P / 2 * 12, 1e-6 * P);
  EXPECT_NE(format_breakdown(with).find("host memory"), std::string::npos);
  EXPECT_EQ(format_breakdown(without).find("host memory"), std::string::npos);
}

// The planner drops what the copy pushes over a shared cluster's memory.
TEST(AsyncSave, ThePlannerCountsTheCopy) {
  Cluster cpu = load_cluster(std::string(LOOM_CLUSTERS_DIR) + "/this-machine.toml");
  PlanRequest req;
  req.model = kModel;
  req.gpus = 1;
  req.global_batch = 8;
  req.precision = "fp32";
  req.schedules = {"1f1b"};
  req.micro_batches = {8};
  req.loops = {1};
  req.recompute = {Recompute::None};
  req.dp_modes = {DpMode::AllReduce};
  const PlanResult free = plan(req, cpu);
  ASSERT_EQ(free.ranked.size(), 1u);
  const double copy = total_params(kModel) * 12;
  // A limit between the peak without the copy and the peak with it.
  req.memory_limit = free.ranked[0].peak_bytes + copy / 2;
  EXPECT_EQ(plan(req, cpu).ranked.size(), 1u);
  req.async_save = true;
  const PlanResult with = plan(req, cpu);
  EXPECT_TRUE(with.ranked.empty());
  EXPECT_EQ(with.dropped_bound + with.over_memory, 1);
}

}  // namespace
}  // namespace loom::plan
