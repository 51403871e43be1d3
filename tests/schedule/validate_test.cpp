// The validator must catch planted faults and point at them in the grid.
#include "loom/schedule/validate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "loom/common/error.h"
#include "loom/schedule/generate.h"
#include "loom/schedule/io.h"
#include "loom/schedule/lower.h"
#include "loom/schedule/timing.h"
#include "test_util.h"

namespace loom::schedule {
namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Checks that validation fails with `message_part` in the message and `mark` in the grid.
void expect_fault(const Schedule& s, const std::string& message_part, const std::string& mark) {
  ValidationResult v = check(s);
  ASSERT_FALSE(v.ok) << "accepted a faulty schedule";
  EXPECT_TRUE(has(v.message, message_part)) << v.message;
  EXPECT_EQ(v.message.find('\n'), std::string::npos) << "message is one line: " << v.message;
  if (!mark.empty()) {
    EXPECT_TRUE(has(v.grid, mark)) << v.grid;
  }
  try {
    validate(s);
    ADD_FAILURE() << "validate() did not throw";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), v.message + "\n" + v.grid);
  }
}

void erase(std::vector<Action>& list, const Action& a) {
  auto it = std::find(list.begin(), list.end(), a);
  ASSERT_NE(it, list.end());
  list.erase(it);
}

TEST(Validate, AcceptsGoodScheduleWithEmptyReport) {
  ValidationResult v = check(generate("1f1b", {2, 1, 4}));
  EXPECT_TRUE(v.ok);
  EXPECT_EQ(v.message, "");
  EXPECT_EQ(v.grid, "");
  EXPECT_NO_THROW(validate(generate("zb-h1", {3, 1, 5})));
}

TEST(Validate, MissingAction) {
  Schedule s = generate("1f1b", {2, 1, 4});
  erase(s.ranks[1], {1, Kind::B, 2});
  expect_fault(s, "missing backward 1B2", "");
  s = generate("1f1b", {2, 1, 4});
  erase(s.ranks[0], {0, Kind::F, 3});
  expect_fault(s, "missing 0F3", "");
  s = generate("zb-h1", {2, 1, 4});
  erase(s.ranks[0], {0, Kind::W, 1});
  expect_fault(s, "missing 0W1", "[0I1]");
}

TEST(Validate, BackwardBeforeForward) {
  Schedule s = generate("1f1b", {2, 1, 4});
  auto& r0 = s.ranks[0];  // 0F0,0F1,0B0,0F2,0B1,...: move 0B1 before 0F1
  erase(r0, {0, Kind::B, 1});
  r0.insert(r0.begin() + 1, {0, Kind::B, 1});
  expect_fault(s, "0B1 comes before 0F1", "[0B1]");
  // W before its I.
  s = generate("zb-h1", {2, 1, 4});
  erase(s.ranks[1], {1, Kind::W, 0});
  s.ranks[1].insert(s.ranks[1].begin(), {1, Kind::W, 0});
  expect_fault(s, "1W0 comes before 1I0", "[1W0]");
}

TEST(Validate, WrongOwner) {
  Schedule s = generate("1f1b", {2, 1, 4});
  erase(s.ranks[1], {1, Kind::F, 0});
  s.ranks[0].insert(s.ranks[0].begin() + 1, {1, Kind::F, 0});
  expect_fault(s, "wrong rank; stage 1 is owned by rank 1", "[1F0]");
  s = generate("bfs", {2, 2, 2});
  s.ranks[0].push_back({4, Kind::F, 0});
  expect_fault(s, "outside stages 0..3", "[4F0]");
  s = generate("bfs", {2, 2, 2});
  s.ranks[0].back().microbatch = 2;
  expect_fault(s, "outside 0..1", "[0B2]");
  s = generate("bfs", {2, 2, 2});
  s.ranks.pop_back();
  expect_fault(s, "1 rank lists but pp=2", "");
}

// Ownership follows the shape's placement: zbv's lists are wrong under looping placement, and a
// looping schedule is wrong under V placement; the message names the placement.
TEST(Validate, VPlacementOwnership) {
  Schedule s = generate("zbv", {3, 2, 4});
  EXPECT_TRUE(check(s).ok) << check(s).message;
  s.shape.placement = Placement::Looping;
  expect_fault(s, "stage 5 is owned by rank 2 (looping placement)", "[5F0]");
  s = generate("bfs", {3, 2, 4});
  s.shape.placement = Placement::V;
  expect_fault(s, "stage 3 is owned by rank 2 (v placement)", "[3F0]");
  // Moving 2F0 to rank 1 (which holds 1 and 4 in the V) is caught too.
  s = generate("zbv", {3, 2, 4});
  erase(s.ranks[2], {2, Kind::F, 0});
  s.ranks[1].insert(s.ranks[1].begin() + 1, {2, Kind::F, 0});
  expect_fault(s, "stage 2 is owned by rank 2 (v placement)", "[2F0]");
}

TEST(Validate, Duplicate) {
  Schedule s = generate("1f1b", {2, 1, 4});
  s.ranks[0].push_back({0, Kind::F, 0});
  expect_fault(s, "duplicate 0F0 (already at rank 0 step 0)", "[0F0]");
  // B and I for the same micro-batch.
  s = generate("1f1b", {2, 1, 2});
  s.ranks[1].push_back({1, Kind::I, 0});
  expect_fault(s, "has both B and I/W", "[1I0]");
}

TEST(Validate, ComputeOnlyDeadlock) {
  Schedule s;
  s.name = "custom";
  s.shape = {2, 1, 2};
  s.ranks = {{{0, Kind::F, 0}, {0, Kind::B, 0}, {0, Kind::F, 1}, {0, Kind::B, 1}},
             {{1, Kind::F, 1}, {1, Kind::B, 1}, {1, Kind::F, 0}, {1, Kind::B, 0}}};
  expect_fault(s, "deadlock", "[0B0]");
  EXPECT_TRUE(has(check(s).grid, "[1F1]"));
  EXPECT_TRUE(has(check(s).message, "rank 1 blocked at 1F1 step 0 waiting for 0F1"));
}

TEST(Validate, LoweredDeadlockBothReceiveFirst) {
  Schedule s = lower(generate("1f1b", {2, 1, 1}), {DpMode::None});
  // rank 0: 0F0,0SEND_F0,0RECV_B0,0B0   rank 1: 1RECV_F0,1F0,1B0,1SEND_B0
  ASSERT_EQ(s.ranks[0].size(), 4u);
  auto& r0 = s.ranks[0];
  std::rotate(r0.begin(), r0.begin() + 2, r0.begin() + 3);  // 0RECV_B0 first
  EXPECT_EQ(to_string(r0[0]), "0RECV_B0");
  expect_fault(s, "deadlock", "[0RECV_B0]");
  ValidationResult v = check(s);
  EXPECT_TRUE(has(v.grid, "[1RECV_F0]")) << v.grid;
  EXPECT_TRUE(has(v.message, "waiting for 1SEND_B0")) << v.message;
  EXPECT_TRUE(has(v.grid, "rank 0 | [0RECV_B0]")) << v.grid;
}

TEST(Validate, LoweredStructure) {
  const Schedule good = lower(generate("1f1b", {2, 1, 2}), {DpMode::Reduce});
  ASSERT_TRUE(check(good).ok);
  Schedule s = good;
  erase(s.ranks[1], {1, Kind::RECV_F, 1});
  expect_fault(s, "lacks 1RECV_F1", "");
  s = good;
  erase(s.ranks[0], {0, Kind::SEND_F, 0});
  s.ranks[0].insert(s.ranks[0].begin(), {0, Kind::SEND_F, 0});
  expect_fault(s, "0SEND_F0 comes before 0F0", "[0SEND_F0]");
  s = good;
  s.ranks[1].push_back({1, Kind::SEND_F, 0});
  expect_fault(s, "no partner", "[1SEND_F0]");
  s = good;  // REDUCE_GRAD before the stage's last backward
  erase(s.ranks[0], {0, Kind::REDUCE_GRAD, kNoMicrobatch});
  s.ranks[0].insert(s.ranks[0].begin(), {0, Kind::REDUCE_GRAD, kNoMicrobatch});
  expect_fault(s, "0REDUCE_GRAD comes before 0B0", "[0REDUCE_GRAD]");
  s = good;
  erase(s.ranks[1], {1, Kind::REDUCE_GRAD, kNoMicrobatch});
  expect_fault(s, "missing 1REDUCE_GRAD", "");
}

TEST(Validate, Sharding) {
  const Schedule good = lower(generate("bfs", {2, 2, 2}), {DpMode::ZeroParams, true, 2});
  ASSERT_TRUE(check(good).ok);
  Schedule s = good;
  erase(s.ranks[0], {0, Kind::UNSHARD, kNoMicrobatch});  // the first one
  expect_fault(s, "0F0 runs while stage 0's parameters are sharded", "[0F0]");
  s = good;
  s.ranks[1].pop_back();  // the final RESHARD
  expect_fault(s, "still gathered", "");
  s = good;
  s.ranks[0].insert(s.ranks[0].begin(), {0, Kind::UNSHARD, kNoMicrobatch});
  expect_fault(s, "already gathered", "");
}

TEST(Validate, GridLayout) {
  Schedule s = generate("1f1b", {2, 1, 2});
  s.ranks[0].push_back({0, Kind::F, 0});
  ValidationResult v = check(s);
  // One line per rank, fixed-width cells, the offending action in brackets.
  EXPECT_EQ(v.grid,
            "rank 0 |  0F0   0F1   0B0   0B1  [0F0]\n"
            "rank 1 |  1F0   1B0   1F1   1B1\n");
}

// Random edits never crash the validator, and what it accepts can be timed (no deadlock).
TEST(Validate, RandomEditsAreDiagnosed) {
  std::mt19937 rng(1234);
  std::vector<Schedule> bases;
  for (const std::string& name : generator_names()) {
    const Shape shape{3, name == "1f1b" || name == "zb-h1" ? 1 : 2, name == "dualpipev" ? 6 : 3};
    bases.push_back(generate(name, shape));
    bases.push_back(lower(bases.back(), {DpMode::ZeroParams, true, 2}));
  }
  int accepted = 0, rejected = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    Schedule s = bases[trial % bases.size()];
    auto& list = s.ranks[rng() % s.ranks.size()];
    const size_t i = rng() % list.size();
    switch (rng() % 5) {
      case 0:  // swap neighbours
        if (i + 1 < list.size()) std::swap(list[i], list[i + 1]);
        break;
      case 1: list.erase(list.begin() + i); break;
      case 2: list.insert(list.begin() + rng() % list.size(), list[i]); break;
      case 3: list[i].stage += static_cast<int>(rng() % 5) - 2; break;
      default: list[i].microbatch += static_cast<int>(rng() % 5) - 2; break;
    }
    ValidationResult v;
    ASSERT_NO_THROW(v = check(s)) << to_csv(s);
    if (v.ok) {
      ++accepted;
      EXPECT_NO_THROW(time_schedule(s)) << to_csv(s);
    } else {
      ++rejected;
      EXPECT_FALSE(v.message.empty());
      EXPECT_FALSE(v.grid.empty());
    }
  }
  EXPECT_GT(accepted, 100);
  EXPECT_GT(rejected, 1000);
}

}  // namespace
}  // namespace loom::schedule
