// Megatron-LM's 2021 pipeline communication in the simulator: batched exchanges that wait for
// both ends (blocking_exchanges + SimOptions::blocking_p2p) and gradient reductions after the
// pipeline flush (SimOptions::grad_reduce_after_flush). Hand-worked with F = 1, B = 2.
#include "loom/plan/blocking_exchanges.h"

#include <gtest/gtest.h>

#include "loom/common/error.h"
#include "loom/plan/simulator.h"
#include "lowered_schedule.h"

namespace loom::plan {
namespace {

using test::lowered;

std::string joined(const std::vector<schedule::Action>& list) {
  std::string s;
  for (const schedule::Action& a : list) s += (s.empty() ? "" : ",") + schedule::to_string(a);
  return s;
}

SimResult run(const schedule::Schedule& s, const CostModel& c, bool blocking, bool after_flush,
              int dp = 1) {
  SimOptions o;
  o.mesh = {dp, s.shape.pp, 1};
  o.blocking_p2p = blocking;
  o.grad_reduce_after_flush = after_flush;
  return simulate(s, c, o);
}

// 1F1B's lowered lists already hold, between two computes, the sends of the first and the
// receives of the second: nothing moves.
TEST(BlockingExchanges, OneFOneBListsStayAsTheyAre) {
  const schedule::Schedule s = lowered("1f1b", {4, 1, 8});
  const schedule::Schedule b = blocking_exchanges(s, false);
  for (size_t r = 0; r < s.ranks.size(); ++r) EXPECT_EQ(joined(b.ranks[r]), joined(s.ranks[r]));
}

// Megatron-LM's interleaved schedule, pp 2, v 2, m 4, rank 0: four warmup forwards, then
// forward-backward pairs whose outputs leave together after the pair, then the cooldown.
TEST(BlockingExchanges, InterleavedSendsAfterEachForwardBackwardPair) {
  const schedule::Schedule b = blocking_exchanges(lowered("interleaved", {2, 2, 4}), true);
  EXPECT_EQ(joined(b.ranks[0]),
            "0F0,0SEND_F0,0F1,0SEND_F1,2RECV_F0,2F0,2SEND_F0,2RECV_F1,2F1,2SEND_F1,2RECV_B0,"
            "0F2,2B0,0SEND_F2,2SEND_B0,2RECV_B1,0F3,2B1,0SEND_F3,2SEND_B1,2RECV_F2,0RECV_B0,"
            "2F2,0B0,2SEND_F2,2RECV_F3,0RECV_B1,2F3,0B1,2SEND_F3,2RECV_B2,"
            "2B2,2SEND_B2,2RECV_B3,2B3,2SEND_B3,0RECV_B2,0B2,0RECV_B3,0B3");
}

// 1F1B, pp 2, m 2, messages 0.5, each send waiting for its receiver:
// r0 F0 0..1, send 1..1.5 (r1 posted at 0); F1 1.5..2.5, then [send F1, recv B0] posted 2.5;
// r1 F0 1.5..2.5, B0 ..4.5, [send B0, recv F1] posted 4.5: both sends 4.5..5;
// r0 B0 5..7, posts recv B1 at 7; r1 F1 5..6, B1 ..8, send 8..8.5; r0 B1 8.5..10.5.
// (Sends that overlap: 10.0, Simulator.OneFOneBWithMessages.)
TEST(BlockingExchanges, OneFOneBSendsWaitForTheReceiver) {
  ConstantCostModel c(2);
  c.message_s = 0.5;
  const schedule::Schedule s = lowered("1f1b", {2, 1, 2});
  const SimResult r = run(s, c, true, false);
  EXPECT_DOUBLE_EQ(r.step_s, 10.5);
  EXPECT_DOUBLE_EQ(r.ranks[1].end_s, 8.5);
  EXPECT_DOUBLE_EQ(r.ideal_step_s, 9.0);
  EXPECT_DOUBLE_EQ(run(s, c, false, false).step_s, 10.0);
}

// Megatron-LM's schedules (and ZB-H1, 1F1B's order) finish under blocking exchanges, never
// earlier than with overlapped sends. Breadth-first and the V schedules send around the
// pipeline ahead of the receives: with every send waiting for its receiver they deadlock,
// which the error says.
TEST(BlockingExchanges, SchedulesFinishNoEarlierOrSayTheyDeadlock) {
  struct Case {
    const char* name;
    schedule::Shape shape;
    bool finishes;
  } cases[] = {{"gpipe", {4, 1, 8}, true},       {"1f1b", {4, 1, 8}, true},
               {"interleaved", {4, 2, 8}, true}, {"interleaved", {3, 3, 6}, true},
               {"zb-h1", {4, 1, 8}, true},       {"bfs", {4, 2, 8}, false},
               {"zbv", {4, 2, 8}, false},        {"dualpipev", {4, 2, 8}, false}};
  for (const Case& k : cases) {
    ConstantCostModel c(k.shape.stages());
    c.message_s = 0.3;
    const schedule::Schedule s = lowered(k.name, k.shape, schedule::DpMode::Reduce);
    const schedule::Schedule b = blocking_exchanges(s, std::string(k.name) == "interleaved");
    if (!k.finishes) {
      try {
        run(b, c, true, false, 2);
        ADD_FAILURE() << k.name << " finished";
      } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("drop --blocking-p2p"), std::string::npos);
      }
      continue;
    }
    const SimResult overlapped = run(s, c, false, false, 2);
    const SimResult blocking = run(b, c, true, false, 2);
    EXPECT_GE(blocking.step_s, overlapped.step_s - 1e-12) << k.name;
    EXPECT_GT(blocking.step_s, 0) << k.name;
  }
}

// Breadth-first, one rank, two stages, m 2, dp 2, all-reduce 1.5 (as in
// Simulator.BreadthFirstOverlapsGradientReduction, 13.5 with overlap): after the flush both
// reductions follow the last backward, 12..13.5..15.
TEST(BlockingExchanges, GradientReductionAfterTheFlush) {
  ConstantCostModel c(2);
  c.all_reduce_s = 1.5;
  const schedule::Schedule s = lowered("bfs", {1, 2, 2}, schedule::DpMode::Reduce);
  const SimResult r = run(s, c, false, true, 2);
  EXPECT_DOUBLE_EQ(r.step_s, 15.0);
  EXPECT_DOUBLE_EQ(r.exposed_comm_s, 3.0);
  EXPECT_DOUBLE_EQ(r.ranks[0].dp_s, 3.0);
  EXPECT_DOUBLE_EQ(run(s, c, false, false, 2).step_s, 13.5);
}

}  // namespace
}  // namespace loom::plan
