#include "loom/schedule/lower.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "loom/common/error.h"
#include "loom/schedule/generate.h"
#include "loom/schedule/validate.h"
#include "test_util.h"

namespace loom::schedule {
namespace {

using test_util::count_kind;
using test_util::shape_str;

// Stages gathered at once on each rank, at worst, following UNSHARD/RESHARD.
int max_gathered(const Schedule& s) {
  int worst = 0;
  for (const auto& list : s.ranks) {
    int now = 0;
    for (const Action& a : list) {
      if (a.kind == Kind::UNSHARD) worst = std::max(worst, ++now);
      if (a.kind == Kind::RESHARD) --now;
    }
  }
  return worst;
}

TEST(Lower, PointToPointCounts) {
  for (const std::string& name : generator_names())
    for (int pp = 1; pp <= 5; ++pp)
      for (int loops = 1; loops <= 3; ++loops)
        for (int m = 1; m <= 8; ++m) {
          const Shape shape{pp, loops, m};
          if (!unsupported_reason(name, shape).empty()) continue;
          const Schedule low = lower(generate(name, shape), {DpMode::None});
          // Every boundary between consecutive stages crosses ranks when pp > 1 (looping
          // placement), all but the V's turn (stages pp-1, pp on the last rank) for zbv and
          // dualpipev; each
          // carries one send and one receive per micro-batch and direction.
          const bool v = placement_of(name) == Placement::V;
          const int crossing = pp == 1 ? 0 : shape.stages() - 1 - (v ? 1 : 0);
          for (Kind k : {Kind::SEND_F, Kind::RECV_F, Kind::SEND_B, Kind::RECV_B})
            EXPECT_EQ(count_kind(low, k), crossing * m) << shape_str(name, shape);
          EXPECT_EQ(count_kind(low, Kind::REDUCE_GRAD), 0);
          EXPECT_EQ(count_kind(low, Kind::UNSHARD), 0);
        }
}

// V placement, pp=3 (stages 0..5 on ranks 0 1 2 2 1 0): the last stage's output gradient needs no
// receive; stage 2 hands its activation to stage 3 on the same rank; rank 0 receives stage 5's
// input from rank 1 and sends stage 0's output to rank 1.
TEST(Lower, VPlacementSendsAcrossRanksOnly) {
  const Schedule low = lower(generate("zbv", {3, 2, 4}), {DpMode::None});
  EXPECT_EQ(low.shape.placement, Placement::V);
  EXPECT_EQ(count_kind(low, Kind::SEND_F, 2), 0);
  EXPECT_EQ(count_kind(low, Kind::RECV_F, 3), 0);
  EXPECT_EQ(count_kind(low, Kind::SEND_B, 3), 0);
  EXPECT_EQ(count_kind(low, Kind::RECV_B, 2), 0);
  EXPECT_EQ(count_kind(low, Kind::RECV_B, 5), 0);
  EXPECT_EQ(count_kind(low, Kind::SEND_F, 4), 4);
  const std::vector<Action>& r0 = low.ranks[0];
  EXPECT_NE(std::find(r0.begin(), r0.end(), Action{5, Kind::RECV_F, 0}), r0.end());
  EXPECT_NE(std::find(r0.begin(), r0.end(), Action{0, Kind::SEND_F, 3}), r0.end());
  for (const Action& a : low.ranks[2]) EXPECT_TRUE(a.stage == 2 || a.stage == 3) << to_string(a);
  for (const LowerOptions& o : {LowerOptions{DpMode::Reduce}, LowerOptions{DpMode::ZeroParams}}) {
    const Schedule l = lower(generate("zbv", {3, 2, 4}), o);
    EXPECT_TRUE(check(l).ok) << check(l).message;
    EXPECT_EQ(count_kind(l, Kind::REDUCE_GRAD), 6);
  }
}

TEST(Lower, ReceiveRightBeforeSendRightAfter) {
  const Schedule low = lower(generate("interleaved", {2, 2, 4}), {DpMode::None});
  for (const auto& list : low.ranks)
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      const Action f{a.stage, Kind::F, a.microbatch}, b{a.stage, Kind::B, a.microbatch};
      if (a.kind == Kind::RECV_F) {
        EXPECT_EQ(list.at(i + 1), f);
      } else if (a.kind == Kind::RECV_B) {
        EXPECT_EQ(list.at(i + 1), b);
      } else if (a.kind == Kind::SEND_F) {
        EXPECT_EQ(list.at(i - 1), f);
      } else if (a.kind == Kind::SEND_B) {
        EXPECT_EQ(list.at(i - 1), b);
      }
    }
}

// REDUCE_GRAD exactly once per stage, with no compute between it and the stage's last
// backward (B, or W for zero-bubble schedules).
TEST(Lower, ReduceGradRightAfterLastBackward) {
  for (const std::string& name : generator_names())
    for (DpMode mode : {DpMode::Reduce, DpMode::ZeroParams}) {
      const Shape shape{3, name == "1f1b" || name == "zb-h1" ? 1 : 2, 6};
      const Schedule low = lower(generate(name, shape), {mode, true, 2});
      for (int st = 0; st < shape.stages(); ++st) {
        EXPECT_EQ(count_kind(low, Kind::REDUCE_GRAD, st), 1);
        const auto& list = low.ranks[low.shape.rank_of(st)];  // zbv: its own placement
        int last_backward = -1, reduce = -1;
        for (int i = 0; i < static_cast<int>(list.size()); ++i) {
          const Action& a = list[i];
          if (a.stage == st && (a.kind == Kind::B || a.kind == Kind::W)) last_backward = i;
          if (a.stage == st && a.kind == Kind::REDUCE_GRAD) reduce = i;
        }
        ASSERT_GT(reduce, last_backward) << shape_str(name, shape);
        for (int i = last_backward + 1; i < reduce; ++i)
          EXPECT_FALSE(is_compute(list[i].kind)) << shape_str(name, shape);
      }
    }
}

// Breadth-first gathers each stage once per phase: 2 UNSHARDs per stage and step when
// resharding after forward, 1 otherwise; the prefetch budget holds.
TEST(Lower, BreadthFirstUnshardCounts) {
  for (int pp = 1; pp <= 4; ++pp)
    for (int loops = 1; loops <= 4; ++loops)
      for (int m : {1, 3, 8})
        for (int budget = 1; budget <= 3; ++budget) {
          const Shape shape{pp, loops, m};
          const Schedule s = generate("bfs", shape);
          const Schedule with = lower(s, {DpMode::ZeroParams, true, budget});
          const Schedule without = lower(s, {DpMode::ZeroParams, false, budget});
          for (int st = 0; st < shape.stages(); ++st) {
            EXPECT_EQ(count_kind(with, Kind::UNSHARD, st), 2) << shape_str("bfs", shape);
            EXPECT_EQ(count_kind(with, Kind::RESHARD, st), 2);
            EXPECT_EQ(count_kind(without, Kind::UNSHARD, st), 1);
            EXPECT_EQ(count_kind(without, Kind::RESHARD, st), 1);
          }
          EXPECT_LE(max_gathered(with), std::max(budget, 1)) << shape_str("bfs", shape);
        }
}

TEST(Lower, BreadthFirstPrefetchesNextStage) {
  // rank 0 of bfs pp=2 loops=2: stage 2 is gathered while stage 0 computes.
  const Schedule low = lower(generate("bfs", {2, 2, 4}), {DpMode::ZeroParams, true, 2});
  EXPECT_EQ(to_string(low.ranks[0][0]), "0UNSHARD");
  EXPECT_EQ(to_string(low.ranks[0][1]), "2UNSHARD");
  const Schedule no_prefetch = lower(generate("bfs", {2, 2, 4}), {DpMode::ZeroParams, true, 1});
  EXPECT_EQ(to_string(no_prefetch.ranks[0][1]), "0F0");
  EXPECT_EQ(max_gathered(no_prefetch), 1);
}

// Depth-first looping returns to each stage once per group of pp micro-batches, so with
// reshard_after_forward it re-gathers about m/pp times per stage and phase (at most 2m/pp per
// step), against breadth-first's 2.
TEST(Lower, InterleavedRegathers) {
  for (int pp = 2; pp <= 6; ++pp)
    for (int loops = 2; loops <= 4; ++loops)
      for (int m = pp; m <= 16; m += pp) {
        const Shape shape{pp, loops, m};
        const Schedule s = generate("interleaved", shape);
        const Schedule with = lower(s, {DpMode::ZeroParams, true, 2});
        const Schedule without = lower(s, {DpMode::ZeroParams, false, 2});
        for (int r = 0; r < pp; ++r) {
          int total = 0;
          for (int c = 0; c < loops; ++c) {
            const int st = c * pp + r;
            const int n = count_kind(with, Kind::UNSHARD, st);
            EXPECT_GE(n, 1);
            EXPECT_LE(n, 2 * m / pp) << shape_str("interleaved", shape) << " stage " << st;
            EXPECT_EQ(count_kind(without, Kind::UNSHARD, st), 1);
            total += n;
          }
          // On average at least m/pp gathers per stage, more than breadth-first's 2 once
          // each stage is visited several times.
          EXPECT_GE(total, loops * m / pp) << shape_str("interleaved", shape) << " rank " << r;
          if (m >= 2 * pp) {
            EXPECT_GT(total, 2 * loops) << shape_str("interleaved", shape);
          }
        }
      }
}

TEST(Lower, DataParallelModes) {
  const Schedule s = generate("1f1b", {2, 1, 3});
  const Schedule none = lower(s, {DpMode::None});
  const Schedule reduce = lower(s, {DpMode::Reduce});
  const Schedule zero = lower(s, {DpMode::ZeroParams});
  EXPECT_EQ(count_kind(none, Kind::REDUCE_GRAD), 0);
  EXPECT_EQ(count_kind(reduce, Kind::REDUCE_GRAD), 2);
  EXPECT_EQ(count_kind(reduce, Kind::UNSHARD), 0);
  EXPECT_EQ(count_kind(zero, Kind::REDUCE_GRAD), 2);
  // One stage per rank used throughout the step: gathered once.
  EXPECT_EQ(count_kind(zero, Kind::UNSHARD), 2);
  EXPECT_EQ(count_kind(zero, Kind::RESHARD), 2);
  EXPECT_EQ(to_string(zero.ranks[1].back()), "1RESHARD");
}

TEST(Lower, RejectsBadInput) {
  const Schedule low = lower(generate("1f1b", {2, 1, 2}));
  EXPECT_THROW(lower(low), UsageError);  // already lowered
  Schedule broken = generate("1f1b", {2, 1, 2});
  broken.ranks[0].pop_back();
  EXPECT_THROW(lower(broken), UsageError);
  EXPECT_THROW(lower(generate("bfs", {2, 2, 2}), {DpMode::ZeroParams, true, 0}), UsageError);
}

}  // namespace
}  // namespace loom::schedule
