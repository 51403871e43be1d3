// The simulator against step times worked out by hand with a constant-cost model.
// F = 1, B = 2 per stage and micro-batch unless a test says otherwise.
#include "loom/plan/simulator.h"

#include <gtest/gtest.h>

#include "loom/common/error.h"
#include "lowered_schedule.h"

namespace loom::plan {
namespace {

using test::lowered;

SimResult run(const schedule::Schedule& s, const CostModel& c, int dp = 1,
              DpMode mode = DpMode::AllReduce) {
  SimOptions o;
  o.mesh = {dp, s.shape.pp, 1};
  o.dp_mode = mode;
  return simulate(s, c, o);
}

// One stage, one micro-batch, dp = 2 under a sharded mode (zero3 gathers the parameters for
// the compute, zero1/zero2 after the step): all-gather 0.5, reduce-scatter 0.25, the rest of `c`.
SimResult run_sharded(ConstantCostModel c, DpMode mode) {
  c.all_gather_s = 0.5;
  c.reduce_scatter_s = 0.25;
  const schedule::DpMode lowering =
      mode == DpMode::Zero3 ? schedule::DpMode::ZeroParams : schedule::DpMode::Reduce;
  return run(lowered("1f1b", {1, 1, 1}, lowering), c, 2, mode);
}

// One micro-batch down a chain of 3 stages on 3 ranks, every message 0.5:
// F 0..1, msg ..1.5, F ..2.5, msg ..3, F ..4, B ..6, msg ..6.5, B ..8.5, msg ..9, B ..11.
TEST(Simulator, OneStageChain) {
  ConstantCostModel c(3);
  c.message_s = 0.5;
  SimResult r = run(lowered("gpipe", {3, 1, 1}), c);
  EXPECT_DOUBLE_EQ(r.step_s, 11.0);
  EXPECT_DOUBLE_EQ(r.ideal_step_s, 9.0);
  EXPECT_DOUBLE_EQ(r.exposed_comm_s, 2.0);
  EXPECT_NEAR(r.bubble_fraction, 1.0 - 9.0 / 27.0, 1e-12);  // each rank busy 3 of 9
  ASSERT_EQ(r.ranks.size(), 3u);
  EXPECT_DOUBLE_EQ(r.ranks[1].p2p_s, 1.0);  // one send each way
  EXPECT_DOUBLE_EQ(r.ranks[0].end_s, 11.0);
  EXPECT_DOUBLE_EQ(r.ranks[2].end_s, 6.5);
  // Rank 1's forward starts when the activation arrives.
  schedule::Timing t = r.timing();
  EXPECT_DOUBLE_EQ(t.ranks[1][0].start, 1500.0);  // milliseconds
}

// Free communication: the closed forms of docs/schedules.md (makespan in units of F + B = 3).
TEST(Simulator, BubblesOfSmallGrids) {
  struct Case {
    const char* name;
    schedule::Shape shape;
    double makespan_units;
  } cases[] = {
      {"gpipe", {4, 1, 8}, 8 + 3},       {"1f1b", {4, 1, 8}, 8 + 3},
      {"1f1b", {2, 1, 2}, 2 + 1},        {"bfs", {2, 2, 4}, 2 * 4 + 1},
      {"bfs", {4, 2, 2}, 4 * 2 + 2 - 1}, {"interleaved", {2, 2, 4}, 2 * 4 + 1},
      {"bfs", {3, 3, 5}, 3 * 5 + 2},
  };
  for (const Case& k : cases) {
    ConstantCostModel c(k.shape.stages());
    SimResult r = run(lowered(k.name, k.shape), c);
    const double busy = k.shape.loops * k.shape.microbatches * 3.0;
    EXPECT_DOUBLE_EQ(r.step_s, 3.0 * k.makespan_units) << k.name;
    EXPECT_DOUBLE_EQ(r.exposed_comm_s, 0.0) << k.name;
    EXPECT_NEAR(r.bubble_fraction, 1.0 - busy / r.step_s, 1e-12) << k.name;
  }
}

// The same chain with a tied head (Megatron-LM's copy on the last stage), all-reduce 2: rank 2
// is done at 6.5, rank 0 at 11; both then all-reduce the copy's gradient 11..13 and rank 1,
// which holds neither end, is not held up.
TEST(Simulator, TiedHeadAllReducedBetweenTheFirstAndLastRank) {
  ConstantCostModel c(3);
  c.message_s = 0.5;
  c.all_reduce_s = 2;
  c.tied = 1;
  SimResult r = run(lowered("gpipe", {3, 1, 1}), c);
  EXPECT_DOUBLE_EQ(r.step_s, 13.0);
  EXPECT_DOUBLE_EQ(r.ranks[0].end_s, 13.0);
  EXPECT_DOUBLE_EQ(r.ranks[2].end_s, 13.0);
  EXPECT_DOUBLE_EQ(r.ranks[1].end_s, 9.0);
  EXPECT_DOUBLE_EQ(r.ranks[0].dp_s, 2.0);
  EXPECT_DOUBLE_EQ(r.ranks[1].dp_s, 0.0);
  EXPECT_DOUBLE_EQ(r.ideal_step_s, 9.0);
  // Interleaved (pp 2, 2 loops): stage 3 on rank 1, the exchange is there too.
  ConstantCostModel four(4);
  four.all_reduce_s = 2;
  const double untied = run(lowered("interleaved", {2, 2, 2}), four).step_s;
  four.tied = 1;
  EXPECT_DOUBLE_EQ(run(lowered("interleaved", {2, 2, 2}), four).step_s, untied + 2);
  // V-shaped (zbv): rank 0 holds the first and the last stage, nothing to exchange.
  const schedule::Shape v{2, 2, 4, schedule::Placement::V};
  ConstantCostModel v_tied(4);
  v_tied.all_reduce_s = 2;
  v_tied.tied = 1;
  EXPECT_DOUBLE_EQ(run(lowered("zbv", v), v_tied).step_s,
                   run(lowered("zbv", v), ConstantCostModel(4)).step_s);
}

// The same chain with loom's tied head (parallel/tied_head.h): the weight goes from rank 0
// after its F (1..1.5, before rank 2 needs it at 3); the copy's gradient goes back once both
// ends are done (rank 2 at 6.5, rank 0 at 11): 11..11.5 on both; rank 1 is not held up.
TEST(Simulator, TiedHeadCopySentToTheLastRankAndItsGradientBack) {
  ConstantCostModel c(3);
  c.message_s = 0.5;
  c.tied_copy = 1;
  SimResult r = run(lowered("gpipe", {3, 1, 1}), c);
  EXPECT_DOUBLE_EQ(r.step_s, 11.5);
  EXPECT_DOUBLE_EQ(r.ranks[0].end_s, 11.5);
  EXPECT_DOUBLE_EQ(r.ranks[2].end_s, 11.5);
  EXPECT_DOUBLE_EQ(r.ranks[1].end_s, 9.0);
  ConstantCostModel untied(3);
  untied.message_s = 0.5;
  const SimResult u = run(lowered("gpipe", {3, 1, 1}), untied);
  EXPECT_DOUBLE_EQ(r.ranks[0].p2p_bytes - u.ranks[0].p2p_bytes, 1.0);  // the weight
  EXPECT_DOUBLE_EQ(r.ranks[1].p2p_bytes - u.ranks[1].p2p_bytes, 0.0);
  EXPECT_DOUBLE_EQ(r.ranks[2].p2p_bytes - u.ranks[2].p2p_bytes, 1.0);  // its gradient
  // V-shaped (zbv): rank 0 holds both ends and copies locally.
  const schedule::Shape v{2, 2, 4, schedule::Placement::V};
  ConstantCostModel v_tied(4);
  v_tied.message_s = 0.5;
  v_tied.tied_copy = 1;
  ConstantCostModel v_untied(4);
  v_untied.message_s = 0.5;
  EXPECT_DOUBLE_EQ(run(lowered("zbv", v), v_tied).step_s, run(lowered("zbv", v), v_untied).step_s);
}

// 1F1B, pp = 2, m = 2, messages 0.5. Rank 0: F0 F1 B0 B1; rank 1: F0 B0 F1 B1.
// r0 F0 0..1 (send ..1.5), F1 1..2 (send 2..2.5); r1 F0 1.5..2.5, B0 ..4.5 (send ..5),
// F1 4.5..5.5, B1 ..7.5 (send ..8); r0 B0 5..7, B1 8..10.
TEST(Simulator, OneFOneBWithMessages) {
  ConstantCostModel c(2);
  c.message_s = 0.5;
  SimResult r = run(lowered("1f1b", {2, 1, 2}), c);
  EXPECT_DOUBLE_EQ(r.step_s, 10.0);
  EXPECT_DOUBLE_EQ(r.ranks[1].end_s, 8.0);
  EXPECT_DOUBLE_EQ(r.ideal_step_s, 9.0);
}

// The same with rank 0 twice as slow (RankSpeedModel {2, 1}): F 2, B 4 and optimizer 2 there.
// r0 F0 0..2 (send ..2.5), F1 2..4 (send ..4.5); r1 F0 2.5..3.5, B0 ..5.5 (send ..6),
// F1 5.5..6.5, B1 ..8.5 (send ..9), optimizer ..10; r0 B0 6..10, B1 10..14, optimizer ..16.
TEST(Simulator, SlowRank) {
  ConstantCostModel c(2);
  c.message_s = 0.5;
  c.optimizer = 1;
  RankSpeedModel slow(c, {2, 1}, {2, 1, 2});
  SimResult r = run(lowered("1f1b", {2, 1, 2}), slow);
  EXPECT_DOUBLE_EQ(r.step_s, 16.0);
  EXPECT_DOUBLE_EQ(r.ranks[0].compute_s, 12.0);
  EXPECT_DOUBLE_EQ(r.ranks[0].optimizer_s, 2.0);
  EXPECT_DOUBLE_EQ(r.ranks[1].end_s, 10.0);
  // Looped placement: stage s on pipeline rank s % pp; V: stages 0 and 3 on rank 0.
  ConstantCostModel four(4);
  RankSpeedModel looped(four, {3, 1}, {2, 2, 2});
  EXPECT_DOUBLE_EQ(looped.compute_s(2, schedule::Kind::F), 3.0);
  EXPECT_DOUBLE_EQ(looped.compute_s(3, schedule::Kind::B), 2.0);
  RankSpeedModel v(four, {3, 1}, {2, 2, 2, schedule::Placement::V});
  EXPECT_DOUBLE_EQ(v.compute_s(2, schedule::Kind::F), 1.0);
  EXPECT_DOUBLE_EQ(v.compute_s(3, schedule::Kind::B), 6.0);
  // Tensor-parallel communication inside an action keeps its time: F = 0.5 compute + 0.5 comm.
  struct WithTpComm : ConstantCostModel {
    using ConstantCostModel::ConstantCostModel;
    double compute_comm_s(int, schedule::Kind) const override { return 0.5; }
  } tp(2);
  RankSpeedModel tp_slow(tp, {2, 1}, {2, 1, 1});
  EXPECT_DOUBLE_EQ(tp_slow.compute_s(0, schedule::Kind::F), 1.5);
  EXPECT_DOUBLE_EQ(tp_slow.compute_s(1, schedule::Kind::F), 1.0);
  EXPECT_DOUBLE_EQ(tp_slow.compute_comm_s(0, schedule::Kind::F), 0.5);
}

// Breadth-first, one rank, two stages, two micro-batches, dp = 2, all-reduce 1.5:
// F x4 0..4; B of stage 1 4..8, its REDUCE_GRAD 8..9.5 overlaps stage 0's B 8..12, whose
// reduction 12..13.5 is the only exposed one.
TEST(Simulator, BreadthFirstOverlapsGradientReduction) {
  ConstantCostModel c(2);
  c.all_reduce_s = 1.5;
  SimResult r = run(lowered("bfs", {1, 2, 2}, schedule::DpMode::Reduce), c, 2);
  EXPECT_DOUBLE_EQ(r.step_s, 13.5);
  EXPECT_DOUBLE_EQ(r.exposed_comm_s, 1.5);
  EXPECT_DOUBLE_EQ(r.ranks[0].dp_s, 3.0);
  // With 2 replicas each all-reduce sends 2 (d-1)/d of the gradient bytes (1 per stage).
  EXPECT_DOUBLE_EQ(r.ranks[0].dp_bytes, 2.0);
}

// zero3 on one stage: UNSHARD 0..0.5, F ..1.5, RESHARD, UNSHARD 1.5..2, B ..4,
// reduce-scatter ..4.25. The optimizer (0.1) and nothing else follow.
TEST(Simulator, Zero3GathersBeforeCompute) {
  ConstantCostModel c(1);
  c.optimizer = 0.1;
  SimResult r = run_sharded(c, DpMode::Zero3);
  EXPECT_DOUBLE_EQ(r.step_s, 4.35);
  EXPECT_DOUBLE_EQ(r.ranks[0].dp_s, 1.25);
  EXPECT_DOUBLE_EQ(r.ranks[0].optimizer_s, 0.1);
}

// zero1 / zero2 all-gather the updated parameters after the optimizer.
TEST(Simulator, Zero1GathersAfterTheStep) {
  SimResult r = run_sharded(ConstantCostModel(1), DpMode::Zero1);
  EXPECT_DOUBLE_EQ(r.step_s, 3.0 + 0.25 + 0.5);
}

// Peak activations: GPipe keeps all m micro-batches of rank 0, 1F1B at most p.
TEST(Simulator, PeakMemoryByCategory) {
  for (const char* name : {"gpipe", "1f1b"}) {
    ConstantCostModel c(4);
    c.mem.params = 1;
    c.mem.grads = 2;
    c.mem.optimizer = 3;
    c.mem.activation = 10;
    c.boundary = 0;  // no receive buffers (below)
    SimResult r = run(lowered(name, {4, 1, 8}), c);
    const int inflight = std::string(name) == "gpipe" ? 8 : 4;
    EXPECT_EQ(r.ranks[0].peak_inflight, inflight) << name;
    EXPECT_DOUBLE_EQ(r.ranks[0].peak.activations, 10.0 * inflight) << name;
    EXPECT_DOUBLE_EQ(r.ranks[0].peak.total(), 6.0 + 10.0 * inflight) << name;
    if (std::string(name) == "1f1b") {
      EXPECT_EQ(r.ranks[3].peak_inflight, 1);  // B right after F
    }
  }
}

// loom's executor posts the receives of the next 8 actions, each with its buffer. GPipe, pp 2,
// m 4: rank 0 runs F0 S F1 S F2 S F3 S, then R B four times; its four gradient buffers exist
// from when their receives are posted (t = 0, 1, 2, 3) until their backwards start (the first
// at 7): four at once. Rank 1 posts its four input receives at once at t = 0 and takes the first
// at 1.
TEST(Simulator, PostedReceivesHoldTheirBuffers) {
  ConstantCostModel c(2);
  c.boundary = 100;
  SimResult r = run(lowered("gpipe", {2, 1, 4}), c);
  EXPECT_DOUBLE_EQ(r.ranks[0].peak.working, 400.0);
  EXPECT_DOUBLE_EQ(r.ranks[1].peak.working, 400.0);
  EXPECT_DOUBLE_EQ(r.ranks[0].peak.total(), 400.0);
}

// zbv (pp 2, m 4): rank 0 sends rank 1 F0 F1 F2 B0 ..., and rank 1's first window of 8 actions
// holds the receives of F0, F1 and B0: the executor posts F2 with them (sent before B0), four
// buffers at once where the window alone would hold three (F0 is taken before F2's own turn).
TEST(Simulator, ReceivesPostedInTheSendersOrder) {
  ConstantCostModel c(4);
  c.boundary = 100;
  SimResult r = run(lowered("zbv", {2, 2, 4, schedule::Placement::V}), c);
  EXPECT_DOUBLE_EQ(r.ranks[1].peak.working, 400.0);
}

// zb-h1 (pp 2, m 4): from its I a micro-batch keeps only W's inputs when the model knows them
// (4 here against an activation of 10). Rank 1 runs F0 I0 F1 I1 W0 F2 ...: one activation and
// one W's inputs at most (14), where it would hold two activations (20) if they stayed to W;
// rank 0 (W right after I) peaks at two activations either way.
TEST(Simulator, WeightInputsFromIToW) {
  for (double w_inputs : {4.0, -1.0}) {
    ConstantCostModel c(2);
    c.mem.activation = 10;
    c.mem.weight_inputs = w_inputs;
    SimResult r = run(lowered("zb-h1", {2, 1, 4}), c);
    EXPECT_DOUBLE_EQ(r.ranks[0].peak_kept, 20.0) << w_inputs;
    EXPECT_DOUBLE_EQ(r.ranks[1].peak_kept, w_inputs < 0 ? 20.0 : 14.0) << w_inputs;
  }
}

// A received activation is the stage's input until the micro-batch's backward ends; what the
// stage's activation bytes do not count of it (a measured block's) is held that long. GPipe,
// pp 2, m 2: rank 1 runs F0 F1 B0 B1 and keeps both received inputs (2 x 100) when B0
// starts; rank 0 receives none.
TEST(Simulator, ReceivedInputsStayToTheBackward) {
  ConstantCostModel c(2);
  c.boundary = 100;
  c.mem.received_input = 100;
  SimResult r = run(lowered("gpipe", {2, 1, 2}), c);
  EXPECT_DOUBLE_EQ(r.ranks[1].peak_kept, 200.0);
  EXPECT_DOUBLE_EQ(r.ranks[0].peak_kept, 0.0);
}

// zero3 memory: the gathered parameters count while the stage computes.
TEST(Simulator, GatheredParametersAndGradientBuffer) {
  ConstantCostModel c(1);
  c.mem.params = 1;
  c.mem.gathered = 8;
  c.mem.grad_buffer = 4;
  SimResult r = run_sharded(c, DpMode::Zero3);
  EXPECT_DOUBLE_EQ(r.ranks[0].peak.params, 9.0);
  EXPECT_DOUBLE_EQ(r.ranks[0].peak.grads, 4.0);
}

// zero2/zero3 with a split backward: the gradient buffer exists from the stage's first I, which
// adds the gradients of the parameters outside the recorded products into it. zb-h1 (pp 2,
// m 2), rank 0: F0 F1 I0 W0 I1 W1; during I0 two activations (20), I's working set (5) and
// the buffer (100). Counted from W0 (no working set there) the peak was 120.
TEST(Simulator, GradientBufferFromTheFirstInputGradient) {
  ConstantCostModel c(2);
  c.mem.activation = 10;
  c.mem.working = 5;
  c.mem.grad_buffer = 100;
  c.boundary = 0;
  SimResult r = run(lowered("zb-h1", {2, 1, 2}, schedule::DpMode::Reduce), c, 2, DpMode::Zero2);
  EXPECT_DOUBLE_EQ(r.ranks[0].peak.total(), 125.0);
  EXPECT_DOUBLE_EQ(r.ranks[0].peak.grads, 100.0);
}

// A split backward's I holds its own working set (W's inputs kept, no weight gradients), B
// and a 1F1B's backward the model's `working`. zb-h1 (pp 2, m 2), rank 0: F0 F1 I0 W0 I1 W1.
TEST(Simulator, InputGradientHasItsOwnWorkingSet) {
  ConstantCostModel c(2);
  c.mem.activation = 10;
  c.mem.working = 5;
  c.mem.working_input = 9;
  c.boundary = 0;
  EXPECT_DOUBLE_EQ(run(lowered("zb-h1", {2, 1, 2}), c).ranks[0].peak.total(), 29.0);
  EXPECT_DOUBLE_EQ(run(lowered("1f1b", {2, 1, 2}), c).ranks[0].peak.total(), 25.0);
  c.mem.working_weight = 50;  // W0: both activations (kept to W here) and W's own set
  EXPECT_DOUBLE_EQ(run(lowered("zb-h1", {2, 1, 2}), c).ranks[0].peak.total(), 70.0);
}

TEST(Simulator, RejectsAScheduleOfAnotherShape) {
  ConstantCostModel c(3);
  EXPECT_THROW(run(lowered("1f1b", {2, 1, 2}), c), UsageError);
}

// The timeline renders through the schedule module and as a Chrome trace.
TEST(Simulator, TraceHasEveryStream) {
  ConstantCostModel c(4);
  c.message_s = 0.1;
  c.all_reduce_s = 0.3;
  SimResult r = run(lowered("bfs", {2, 2, 2}, schedule::DpMode::Reduce), c, 2);
  std::string json = sim_trace_json(r);
  EXPECT_NE(json.find("\"tid\":0"), std::string::npos);
  EXPECT_NE(json.find("SEND_F"), std::string::npos);
  EXPECT_NE(json.find("REDUCE_GRAD"), std::string::npos);
  EXPECT_EQ(r.timing().ranks[0].size(), 8u);  // 2 stages x 2 micro-batches x (F, B)
}

}  // namespace
}  // namespace loom::plan
