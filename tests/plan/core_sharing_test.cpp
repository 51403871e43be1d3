// Processor sharing of a machine's cores (plan/core_sharing.h), and the simulator on shared
// cores, against timelines worked out by hand.
#include "loom/plan/core_sharing.h"

#include <gtest/gtest.h>

#include "loom/plan/simulator.h"
#include "loom/schedule/generate.h"
#include "loom/schedule/lower.h"

namespace loom::plan {
namespace {

TEST(CoreSharing, RateOfOneRank) {
  EXPECT_DOUBLE_EQ(CoreSharing::rate(1, 2, 1.8), 1.0);                  // alone
  EXPECT_DOUBLE_EQ(CoreSharing::rate(2, 2, 1.8), 1.0 / 1.8);            // every core busy
  EXPECT_DOUBLE_EQ(CoreSharing::rate(3, 4, 2.0), 1.0 / (1 + 2.0 / 3));  // in between
  EXPECT_DOUBLE_EQ(CoreSharing::rate(4, 2, 1.8), 0.5 / 1.8);            // time-shared
  EXPECT_DOUBLE_EQ(CoreSharing::rate(2, 1, 1.0), 0.5);
  EXPECT_DOUBLE_EQ(CoreSharing::rate(2, 2, 0.5), 1.0);  // slowdown below 1 = 1
}

// Two jobs on one core: A (work 2) from 0, B (work 1) from 1. A alone 0..1 (1 left), then
// both at half speed: both end at 3.
TEST(CoreSharing, TwoJobsOnOneCore) {
  CoreSharing cs(1, 1, 2);
  cs.submit(0, 0.0, 2.0, 1.0);
  cs.submit(1, 1.0, 1.0, 1.0);
  ASSERT_TRUE(cs.resolve());
  double a = 0, b = 0;
  EXPECT_TRUE(cs.take_finished(0, &a));
  EXPECT_TRUE(cs.take_finished(1, &b));
  EXPECT_DOUBLE_EQ(a, 3.0);
  EXPECT_DOUBLE_EQ(b, 3.0);
  EXPECT_FALSE(cs.take_finished(0, &a));  // taken once
  EXPECT_FALSE(cs.resolve());             // nothing left
}

// More world ranks than cores (2 jobs x 2 replicas on 2 cores) with a measured oversubscription
// of 1.5: a job alone takes 1.5x its time even while the other waits; both at once take
// 1.5 x 2 (the fair share of 4 ranks on 2 cores). With no more ranks than cores the factor
// does not apply.
TEST(CoreSharing, OversubscribedWorld) {
  CoreSharing over(2, 2, 2, 1.5);
  over.submit(0, 0.0, 1.0, 1.0);
  ASSERT_TRUE(over.resolve());
  double end = 0;
  ASSERT_TRUE(over.take_finished(0, &end));
  EXPECT_DOUBLE_EQ(end, 1.5);
  over.submit(0, 2.0, 1.0, 1.0);
  over.submit(1, 2.0, 1.0, 1.0);
  ASSERT_TRUE(over.resolve());
  ASSERT_TRUE(over.take_finished(0, &end));
  EXPECT_DOUBLE_EQ(end, 2.0 + 3.0);
  CoreSharing fits(2, 1, 2, 1.5);  // 2 world ranks on 2 cores
  fits.submit(0, 0.0, 1.0, 1.0);
  ASSERT_TRUE(fits.resolve());
  ASSERT_TRUE(fits.take_finished(0, &end));
  EXPECT_DOUBLE_EQ(end, 1.0);
}

// Replicas count: one simulated job standing for 2 world ranks on 2 cores with slowdown 1.5
// runs at 1 / 1.5 even when it is the only one; a later job ends first and leaves.
TEST(CoreSharing, ReplicasAndOrder) {
  CoreSharing cs(2, 2, 2);
  cs.submit(0, 0.0, 3.0, 1.5);  // alone (2 world ranks): 0..1 does 1/1.5
  cs.submit(1, 1.0, 0.25, 1.0);
  // From 1: 4 world ranks on 2 cores: job 0 at 0.5/1.5 = 1/3, job 1 at 0.5 -> job 1 ends 1.5.
  ASSERT_TRUE(cs.resolve());
  double end = 0;
  EXPECT_FALSE(cs.take_finished(0, &end));
  ASSERT_TRUE(cs.take_finished(1, &end));
  EXPECT_DOUBLE_EQ(end, 1.5);
  // Job 0 did 1/1.5 + 0.5/3 = 5/6 by 1.5; 13/6 left at 1/1.5 -> ends at 1.5 + 3.25 = 4.75.
  ASSERT_TRUE(cs.resolve());
  ASSERT_TRUE(cs.take_finished(0, &end));
  EXPECT_NEAR(end, 4.75, 1e-12);
}

schedule::Schedule lowered(const std::string& name, schedule::Shape shape) {
  return schedule::lower(schedule::generate(name, shape), {});
}

SimResult run(const schedule::Schedule& s, const CostModel& c, int dp = 1) {
  SimOptions o;
  o.mesh = {dp, s.shape.pp, 1};
  return simulate(s, c, o);
}

// 1F1B, pp = 2, m = 2, F = 1, B = 2, free messages, 2 cores, slowdown 2 with both busy.
// Rank 0: F0 F1 B0 B1; rank 1: F0 B0 F1 B1.
//   0..1  r0 F0 alone
//   1..3  r0 F1 and r1 F0 at half speed
//   3..5  r1 B0 alone (r0 waits for its gradient)
//   5..7  r1 F1 (1) and r0 B0 (1 of 2) at half speed
//   7..9  r1 B1 (1 of 2) and r0 B0 (the rest) at half speed
//   9..10 r1 B1 alone (the rest); 10..12 r0 B1 alone.
// On devices of their own the same schedule takes 9.
TEST(Simulator, SharedCoresSlowRanksThatComputeTogether) {
  ConstantCostModel c(2);
  EXPECT_DOUBLE_EQ(run(lowered("1f1b", {2, 1, 2}), c).step_s, 9.0);
  c.cores = 2;
  c.slowdown = 2;
  SimResult r = run(lowered("1f1b", {2, 1, 2}), c);
  EXPECT_DOUBLE_EQ(r.step_s, 12.0);
  EXPECT_DOUBLE_EQ(r.ranks[1].end_s, 10.0);
  EXPECT_DOUBLE_EQ(r.ranks[0].compute_s, 1 + 2 + 4 + 2);  // wall time in compute
  schedule::Timing t = r.timing();
  EXPECT_DOUBLE_EQ(t.ranks[0][2].start, 5000.0);  // B0 waits for rank 1's B0
  EXPECT_DOUBLE_EQ(t.ranks[0][2].end, 9000.0);
  // Without slowdown two cores are two devices.
  c.slowdown = 1;
  EXPECT_DOUBLE_EQ(run(lowered("1f1b", {2, 1, 2}), c).step_s, 9.0);
}

// dp = 2 replicas of the same pipeline on 2 cores (4 ranks): alone phases run 2 ranks on 2
// cores, shared phases 4: with slowdown 1 the timeline is the one above (12); with slowdown 2
// every phase takes twice as long (24).
TEST(Simulator, ReplicasTimeShareTheCores) {
  ConstantCostModel c(2);
  c.cores = 2;
  EXPECT_DOUBLE_EQ(run(lowered("1f1b", {2, 1, 2}), c, 2).step_s, 12.0);
  c.slowdown = 2;
  EXPECT_DOUBLE_EQ(run(lowered("1f1b", {2, 1, 2}), c, 2).step_s, 24.0);
}

// The optimizer is compute too: one stage, dp = 2 on 2 cores, slowdown 1.5: F 1.5, B 3,
// optimizer 0.1 -> 0.15.
TEST(Simulator, SharedCoresSlowTheOptimizer) {
  ConstantCostModel c(1);
  c.cores = 2;
  c.slowdown = 1.5;
  c.optimizer = 0.1;
  SimResult r = run(lowered("1f1b", {1, 1, 1}), c, 2);
  EXPECT_NEAR(r.step_s, 4.65, 1e-12);
  EXPECT_NEAR(r.ranks[0].optimizer_s, 0.15, 1e-12);
}

}  // namespace
}  // namespace loom::plan
