// Bubbles and activation peaks against the closed forms of docs/schedules.md (Generators).
// Unit per-stage costs F, B (= I + W); p = pp, v = loops, m = micro-batches; every rank is busy
// v*m*(F+B), so the bubble fraction is 1 - v*m*(F+B) / makespan.
#include "loom/schedule/timing.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "loom/common/error.h"
#include "loom/schedule/generate.h"
#include "loom/schedule/lower.h"
#include "test_util.h"

namespace loom::schedule {
namespace {

using test_util::shape_str;

const UnitCosts kCosts[] = {{1, 2, 1, 1}, {1, 1, 0.5, 0.5}, {2, 3, 1, 2}};

void expect_makespan(const std::string& name, const Shape& shape, const UnitCosts& c, double want) {
  const Timing t = time_schedule(generate(name, shape), c);
  EXPECT_DOUBLE_EQ(t.makespan, want) << shape_str(name, shape) << " F=" << c.f << " B=" << c.b;
  const double busy = shape.loops * shape.microbatches * (c.f + c.b);
  for (int r = 0; r < shape.pp; ++r) EXPECT_DOUBLE_EQ(t.busy(r), busy);
  EXPECT_NEAR(t.bubble_fraction(), 1.0 - busy / want, 1e-12);
}

// GPipe and 1F1B: makespan (m + p - 1)(F + B), bubble fraction (p - 1)/(m + p - 1), any m.
TEST(Timing, GPipeAnd1F1BMakespan) {
  for (int p = 1; p <= 8; ++p)
    for (int m = 1; m <= 16; ++m)
      for (const UnitCosts& c : kCosts)
        for (const char* name : {"gpipe", "1f1b"})
          expect_makespan(name, {p, 1, m}, c, (m + p - 1) * (c.f + c.b));
  EXPECT_NEAR(time_schedule(generate("1f1b", {4, 1, 8})).bubble_fraction(), 3.0 / 11, 1e-12);
}

// Breadth-first: with m >= p a rank never waits inside a phase, so each rank idles
// (p - 1)(F + B) in total: makespan (v m + p - 1)(F + B), idle/busy = (p - 1)/(v m).
// With m < p the pipeline chain dominates: makespan (p v + m - 1)(F + B); each extra loop adds
// (p - m)(F + B) of idle time.
TEST(Timing, BreadthFirstMakespan) {
  for (int p = 1; p <= 8; ++p)
    for (int v = 1; v <= 4; ++v)
      for (int m = 1; m <= 16; ++m)
        for (const UnitCosts& c : kCosts) {
          const int want = m >= p ? v * m + p - 1 : p * v + m - 1;
          expect_makespan("bfs", {p, v, m}, c, want * (c.f + c.b));
          expect_makespan("gpipe", {p, v, m}, c, want * (c.f + c.b));
        }
}

// Megatron's interleaved schedule with m % p == 0 has the same bubble as breadth-first:
// makespan (v m + p - 1)(F + B), bubble fraction (p - 1)/(v m + p - 1).
TEST(Timing, InterleavedMakespan) {
  for (int p = 1; p <= 8; ++p)
    for (int v = 2; v <= 4; ++v)
      for (int m = p; m <= 16; m += p)
        for (const UnitCosts& c : kCosts)
          expect_makespan("interleaved", {p, v, m}, c, (v * m + p - 1) * (c.f + c.b));
  EXPECT_NEAR(time_schedule(generate("interleaved", {4, 2, 8})).bubble_fraction(), 3.0 / 19, 1e-12);
}

// ZB-H1 with F = I = W = 1 against 1F1B with F = 1, B = 2: the I chain is half as long as
// the B chain and the delayed W's fill the cool-down: makespan m(F+I+W) + (p - 1)(F + I - W)
// = 3m + p - 1 for m >= p, a third of 1F1B's bubble 3(p - 1).
TEST(Timing, ZeroBubbleBeats1F1B) {
  const UnitCosts unit{1, 2, 1, 1};
  for (int p = 1; p <= 8; ++p)
    for (int m = 1; m <= 16; ++m) {
      const Shape shape{p, 1, m};
      const Timing zb = time_schedule(generate("zb-h1", shape), unit);
      const Timing base = time_schedule(generate("1f1b", shape), unit);
      EXPECT_LE(zb.makespan, base.makespan) << shape_str("zb-h1", shape);
      if (m >= p) {
        EXPECT_DOUBLE_EQ(zb.makespan, 3 * m + p - 1) << shape_str("zb-h1", shape);
      }
      if (m >= p && p >= 2) {
        EXPECT_LT(zb.makespan, base.makespan) << shape_str("zb-h1", shape);
      }
    }
}

// ZB-V with F = I = W = 1 per stage: every rank is busy 6m; the last rank waits p - 1 for its
// first forward and, given enough micro-batches, never again, so the makespan is 6m + p - 1.
// With few micro-batches the round trip of the first micro-batch down and up the V (its 2p
// forwards, then the I chain back) dominates: 4m + 4p - 2. The same model on p ranks in 1F1B
// or zb-h1 has stages twice as big (F = 2, B = 4 or I = W = 2 in these units): makespans
// 6(m + p - 1) and, for m >= p, 6m + 2(p - 1), never below zbv's; 1F1B's above it for
// p >= 2, zb-h1's for m > p >= 2 (with m <= p one micro-batch's round trip bounds both).
TEST(Timing, ZbvMakespan) {
  for (int p = 1; p <= 8; ++p)
    for (int m = 1; m <= 24; ++m) {
      const Shape shape{p, 2, m};
      const Timing t = time_schedule(generate("zbv", shape), {1, 2, 1, 1});
      const double want = std::max(6 * m + p - 1, 4 * m + 4 * p - 2);
      EXPECT_DOUBLE_EQ(t.makespan, want) << shape_str("zbv", shape);
      for (int r = 0; r < p; ++r) EXPECT_DOUBLE_EQ(t.busy(r), 6 * m);
      EXPECT_NEAR(t.bubble_fraction(), 1 - 6.0 * m / want, 1e-12) << shape_str("zbv", shape);
      const Timing f1b1 = time_schedule(generate("1f1b", {p, 1, m}), {2, 4, 2, 2});
      const Timing zbh1 = time_schedule(generate("zb-h1", {p, 1, m}), {2, 4, 2, 2});
      EXPECT_LE(t.makespan, zbh1.makespan) << shape_str("zbv", shape);
      EXPECT_LT(t.makespan, f1b1.makespan + (p == 1 ? 1 : 0)) << shape_str("zbv", shape);
      if (p >= 2 && m > p) {
        EXPECT_LT(t.makespan, zbh1.makespan) << shape_str("zbv", shape);
      }
      if (2 * m >= 3 * p - 1) {
        EXPECT_DOUBLE_EQ(t.makespan, 6 * m + p - 1) << shape_str("zbv", shape);
      }
    }
  // pp=4 m=8: 51 against 1F1B's 66 (bubble 5.9% against 27.3%).
  EXPECT_NEAR(time_schedule(generate("zbv", {4, 2, 8})).bubble_fraction(), 3.0 / 51, 1e-12);
}

// ZB-V's activations, in stage-loads of its (half-size) stages: rank r peaks at
// min(m + r + 1, 2m, 2p), i.e. 2p on every rank once m >= 2p - 1: p stage-loads of 1F1B on the
// same model, on every rank (1F1B's rank 0 holds p of them, its last rank one).
TEST(Timing, ZbvPeakActivations) {
  for (int p = 1; p <= 8; ++p)
    for (int m = 1; m <= 24; ++m) {
      const std::vector<int> zbv = peak_activations(generate("zbv", {p, 2, m}));
      const std::vector<int> f1b1 = peak_activations(generate("1f1b", {p, 1, m}));
      for (int r = 0; r < p; ++r) {
        EXPECT_EQ(zbv[r], std::min({m + r + 1, 2 * m, 2 * p}))
            << "pp=" << p << " m=" << m << " rank " << r;
        EXPECT_LE(zbv[r], 2 * f1b1[0]);  // 1F1B's peak, counted in half-size stages
      }
    }
}

// DualPipeV with F = I = W = 1, B = 2 (m >= 2p): makespan 6m + p - 1, as zbv's for large m (the
// pairs DualPipe overlaps run one after the other here), at 2p + 1 live pairs on every rank:
// one more than zbv.
TEST(Timing, DualPipeVMakespanAndMemory) {
  for (int p = 1; p <= 8; ++p)
    for (int m = 2 * p; m <= 2 * p + 16; ++m) {
      const Shape shape{p, 2, m};
      const Schedule s = generate("dualpipev", shape);
      const Timing t = time_schedule(s, {1, 2, 1, 1});
      EXPECT_DOUBLE_EQ(t.makespan, 6 * m + p - 1) << shape_str("dualpipev", shape);
      for (int r = 0; r < p; ++r) EXPECT_DOUBLE_EQ(t.busy(r), 6 * m);
      const std::vector<int> peak = peak_activations(s);
      for (int r = 0; r < p; ++r)
        EXPECT_EQ(peak[r], 2 * p + 1) << shape_str("dualpipev", shape) << " rank " << r;
    }
}

TEST(Timing, PeakActivations) {
  for (int p = 1; p <= 8; ++p)
    for (int m = 1; m <= 16; ++m) {
      const Shape one{p, 1, m};
      const std::vector<int> gpipe = peak_activations(generate("gpipe", one));
      const std::vector<int> f1b1 = peak_activations(generate("1f1b", one));
      const std::vector<int> zb = peak_activations(generate("zb-h1", one));
      for (int r = 0; r < p; ++r) {
        EXPECT_EQ(gpipe[r], m);
        EXPECT_EQ(f1b1[r], std::min(p - r, m)) << "rank " << r;
        // Every rank holds what 1F1B's first rank holds (the later ones partly as W's inputs).
        EXPECT_EQ(zb[r], f1b1[0]) << shape_str("zb-h1", one) << " rank " << r;
      }
      for (int v = 1; v <= 4; ++v) {
        const std::vector<int> bfs = peak_activations(generate("bfs", {p, v, m}));
        for (int r = 0; r < p; ++r) EXPECT_EQ(bfs[r], m * v);
        if (v > 1 && m % p == 0) {
          // Megatron: warm-up + 1 stage-loads, i.e. about p(1 + (p-1)/(p v)) micro-batches.
          const std::vector<int> inter = peak_activations(generate("interleaved", {p, v, m}));
          for (int r = 0; r < p; ++r)
            EXPECT_EQ(inter[r], std::min(2 * (p - r - 1) + (v - 1) * p + 1, m * v));
        }
      }
    }
}

TEST(Timing, IgnoresCommunicationAndFollowsDependencies) {
  Schedule s = generate("zb-h1", {3, 1, 6});
  const Timing plain = time_schedule(s);
  const Timing low = time_schedule(lower(s, {DpMode::ZeroParams, true, 2}));
  EXPECT_DOUBLE_EQ(plain.makespan, low.makespan);
  for (const auto& row : plain.ranks)
    for (size_t i = 1; i < row.size(); ++i) EXPECT_GE(row[i].start, row[i - 1].end);
  // W runs after its own I, even with W much cheaper.
  const Timing t = time_schedule(s, {1, 2, 1, 0.25});
  for (const auto& row : t.ranks) {
    double i_end = -1;
    for (const TimedAction& a : row) {
      if (a.action.kind == Kind::I && a.action.microbatch == 0) i_end = a.end;
      if (a.action.kind == Kind::W && a.action.microbatch == 0) {
        EXPECT_GE(a.start, i_end);
      }
    }
  }
}

TEST(Timing, DeadlockThrows) {
  Schedule s;
  s.name = "custom";
  s.shape = {2, 1, 2};
  s.ranks = {{{0, Kind::F, 0}, {0, Kind::B, 0}, {0, Kind::F, 1}, {0, Kind::B, 1}},
             {{1, Kind::F, 1}, {1, Kind::B, 1}, {1, Kind::F, 0}, {1, Kind::B, 0}}};
  try {
    time_schedule(s);
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 at 0B0"), std::string::npos) << e.what();
  }
  s.ranks[1].push_back({5, Kind::F, 0});
  EXPECT_THROW(time_schedule(s), UsageError);
}

}  // namespace
}  // namespace loom::schedule
