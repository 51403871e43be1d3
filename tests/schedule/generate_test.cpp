#include "loom/schedule/generate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "loom/common/error.h"
#include "loom/schedule/lower.h"
#include "loom/schedule/timing.h"
#include "loom/schedule/validate.h"
#include "test_util.h"

namespace loom::schedule {
namespace {

using test_util::shape_str;
using test_util::sweep_shapes;

bool supported(const std::string& name, const Shape& s) {
  if (name == "1f1b" || name == "zb-h1") return s.loops == 1;
  if (name == "interleaved") return s.loops == 1 || s.microbatches % s.pp == 0;
  if (name == "zbv") return s.loops == 2;
  if (name == "dualpipev") return s.loops == 2 && s.microbatches >= 2 * s.pp;
  return true;  // gpipe, bfs
}

TEST(Generate, Names) {
  EXPECT_EQ(generator_names(), (std::vector<std::string>{"gpipe", "1f1b", "interleaved", "bfs",
                                                         "zb-h1", "zbv", "dualpipev"}));
}

// Every generator over pp 1..8, loops 1..4, m 1..16: supported shapes validate, also once
// lowered in every data-parallel mode; unsupported ones throw UsageError with a reason.
TEST(Generate, SweepValidatesAndLowers) {
  const LowerOptions modes[] = {{DpMode::None, true, 2},
                                {DpMode::Reduce, true, 2},
                                {DpMode::ZeroParams, true, 2},
                                {DpMode::ZeroParams, false, 2},
                                {DpMode::ZeroParams, true, 1}};
  int generated = 0;
  for (const std::string& name : generator_names()) {
    for (const Shape& shape : sweep_shapes()) {
      const std::string what = shape_str(name, shape);
      const std::string reason = unsupported_reason(name, shape);
      ASSERT_EQ(reason.empty(), supported(name, shape)) << what << ": " << reason;
      if (!reason.empty()) {
        EXPECT_THROW(generate(name, shape), UsageError) << what;
        continue;
      }
      Schedule s = generate(name, shape);
      ++generated;
      ASSERT_EQ(s.name, name);
      ASSERT_EQ(s.shape.pp, shape.pp);
      ASSERT_EQ(s.shape.placement,
                name == "zbv" || name == "dualpipev" ? Placement::V : Placement::Looping)
          << what;
      ValidationResult v = check(s);
      ASSERT_TRUE(v.ok) << what << ": " << v.message << "\n" << v.grid;
      for (const auto& list : s.ranks)
        for (const Action& a : list) ASSERT_TRUE(is_compute(a.kind)) << what;
      for (const LowerOptions& opts : modes) {
        Schedule low = lower(s, opts);
        ValidationResult lv = check(low);
        ASSERT_TRUE(lv.ok) << what << " lowered mode " << static_cast<int>(opts.dp_mode) << ": "
                           << lv.message << "\n"
                           << lv.grid;
        // Lowering only inserts; the compute order is untouched.
        ASSERT_EQ(test_util::strip_to_compute(low).ranks, s.ranks) << what;
      }
    }
  }
  EXPECT_GT(generated, 1500);
}

TEST(Generate, UnsupportedShapesExplainTheFix) {
  auto reason_of = [](const std::string& name, Shape s) {
    try {
      generate(name, s);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(reason_of("1f1b", {2, 2, 4}).find("use interleaved or bfs"), std::string::npos);
  EXPECT_NE(reason_of("zb-h1", {2, 3, 4}).find("loops=1"), std::string::npos);
  EXPECT_NE(reason_of("interleaved", {4, 2, 6}).find("divisible by pp"), std::string::npos);
  EXPECT_NE(reason_of("interleaved", {4, 2, 6}).find("microbatches=8"), std::string::npos);
  EXPECT_NE(reason_of("nope", {2, 1, 4})
                .find("known: gpipe, 1f1b, interleaved, bfs, zb-h1, zbv, "
                      "dualpipev"),
            std::string::npos);
  for (int loops : {1, 3, 4}) {
    EXPECT_NE(reason_of("zbv", {4, loops, 8}).find("set --loops 2"), std::string::npos) << loops;
    EXPECT_NE(reason_of("dualpipev", {4, loops, 8}).find("set --loops 2"), std::string::npos);
  }
  EXPECT_NE(reason_of("dualpipev", {4, 2, 7}).find("use microbatches=8 or the zbv schedule"),
            std::string::npos);
  for (Shape bad : {Shape{0, 1, 1}, Shape{1, 0, 1}, Shape{1, 1, 0}, Shape{-2, 1, 4}})
    for (const std::string& name : generator_names()) {
      EXPECT_FALSE(unsupported_reason(name, bad).empty());
      EXPECT_THROW(generate(name, bad), UsageError);
    }
  EXPECT_EQ(unsupported_reason("interleaved", {4, 1, 6}), "");
}

TEST(Generate, InterleavedWithOneLoopIs1F1B) {
  for (int pp = 1; pp <= 6; ++pp)
    for (int m = 1; m <= 9; ++m)
      EXPECT_EQ(generate("interleaved", {pp, 1, m}).ranks, generate("1f1b", {pp, 1, m}).ranks);
}

TEST(Generate, GPipeAndBfsAgree) {
  // bfs with one loop is GPipe; gpipe with loops is breadth-first too.
  for (int pp = 1; pp <= 4; ++pp)
    for (int loops = 1; loops <= 3; ++loops)
      EXPECT_EQ(generate("gpipe", {pp, loops, 5}).ranks, generate("bfs", {pp, loops, 5}).ranks);
}

TEST(Generate, InterleavedFollowsMegatronOrder) {
  // pp=4, v=2, m=8, rank 0: warm-up (4-0-1)*2 + (2-1)*4 = 10 forwards, chunk-major in groups
  // of pp micro-batches, then one forward / one backward, backward chunks reversed.
  Schedule s = generate("interleaved", {4, 2, 8});
  const std::vector<std::string> want = {"0F0", "0F1", "0F2", "0F3", "4F0", "4F1", "4F2",
                                         "4F3", "0F4", "0F5", "0F6", "4B0", "0F7", "4B1"};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(to_string(s.ranks[0][i]), want[i]) << i;
  EXPECT_EQ(to_string(s.ranks[0].back()), "0B7");
  // Rank 3: warm-up 4.
  EXPECT_EQ(to_string(s.ranks[3][4]), "7F0");
  EXPECT_EQ(to_string(s.ranks[3][5]), "7B0");
}

// V placement: rank r holds stages r and 2p-1-r, whatever placement the requested shape says.
TEST(Generate, ZbvIsVShaped) {
  for (const std::string name : {"zbv", "dualpipev"})
    for (int p = 1; p <= 6; ++p) {
      Shape asked{p, 2, 12};
      asked.placement = Placement::Looping;
      const Schedule s = generate(name, asked);
      EXPECT_EQ(s.shape.placement, Placement::V);
      for (int r = 0; r < p; ++r) {
        std::set<int> held;
        for (const Action& a : s.ranks[r]) held.insert(a.stage);
        EXPECT_EQ(held, (std::set<int>{r, 2 * p - 1 - r})) << name << " pp=" << p << " rank " << r;
        EXPECT_EQ(s.shape.stages_of(r), (std::vector<int>{r, 2 * p - 1 - r}));
      }
    }
  EXPECT_EQ(placement_of("zbv"), Placement::V);
  EXPECT_EQ(placement_of("dualpipev"), Placement::V);
  EXPECT_EQ(placement_of("zb-h1"), Placement::Looping);
}

// pp=4, m=8, the phases of gen_zbv.cpp: rank 0 warms up with 2p-1 = 7 forwards of chunk 0, then
// (no pairs) F1 I1 W1 four times, then the steady F0 I0 W0 F1 I1 W1; rank 3 warms up with one F0,
// then three F1 F0 pairs.
TEST(Generate, ZbvPhases) {
  const Schedule s = generate("zbv", {4, 2, 8});
  auto text = [&](int r, size_t from, size_t n) {
    std::string out;
    for (size_t i = from; i < from + n; ++i) out += to_string(s.ranks[r].at(i)) + " ";
    return out;
  };
  EXPECT_EQ(text(0, 0, 10), "0F0 0F1 0F2 0F3 0F4 0F5 0F6 7F0 7I0 7W0 ");
  EXPECT_EQ(text(0, 19, 6), "0F7 0I0 0W0 7F4 7I4 7W4 ");
  EXPECT_EQ(text(3, 0, 10), "3F0 4F0 3F1 4F1 3F2 4F2 3F3 4F3 4I0 4W0 ");
  EXPECT_EQ(to_string(s.ranks[0].back()), "0W7");
}

// DualPipeV, pp=2, m=5, rank 0: 2 forwards of chunk 0, one F0 F1 pair, one I1 W1 F1, then the
// steady F0 B1 F1 B0 (m - 2p + 1 = 2 times); rank 1 has no I/W warm-up and pairs from its 5th
// action on.
TEST(Generate, DualPipeVPhases) {
  const Schedule s = generate("dualpipev", {2, 2, 5});
  auto text = [&](int r, size_t from, size_t n) {
    std::string out;
    for (size_t i = from; i < from + n; ++i) out += to_string(s.ranks[r].at(i)) + " ";
    return out;
  };
  EXPECT_EQ(text(0, 0, 15), "0F0 0F1 0F2 3F0 3I0 3W0 3F1 0F3 3B1 3F2 0B0 0F4 3B2 3F3 0B1 ");
  EXPECT_EQ(text(1, 0, 8), "1F0 2F0 1F1 2F1 1F2 2B0 2F2 1B0 ");
}

TEST(Generate, OneF1BWarmup) {
  Schedule s = generate("1f1b", {4, 1, 8});
  for (int r = 0; r < 4; ++r) {
    // The first backward comes after pp - r forwards.
    auto first_b = std::find_if(s.ranks[r].begin(), s.ranks[r].end(),
                                [](const Action& a) { return a.kind == Kind::B; });
    EXPECT_EQ(first_b - s.ranks[r].begin(), 4 - r);
  }
}

}  // namespace
}  // namespace loom::schedule
