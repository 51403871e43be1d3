#include "loom/model/partition.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <tuple>
#include <utility>

#include "loom/common/error.h"

using loom::model::partition;
using loom::model::Partition;

namespace {

double max_stage_cost(const Partition& p, const std::vector<double>& c) {
  double worst = 0;
  for (int s = 0; s < int(p.first.size()); ++s)
    worst = std::max(worst, std::accumulate(c.begin() + p.begin(s), c.begin() + p.end(s), 0.0));
  return worst;
}

// Exhaustive minimum of the max stage cost, for checking the dynamic program.
double brute_force(const std::vector<double>& c, int stages, int from = 0) {
  int n = int(c.size());
  if (stages == 1) return std::accumulate(c.begin() + from, c.end(), 0.0);
  double best = 1e300;
  for (int cut = from + 1; cut <= n - stages + 1; ++cut)
    best = std::min(best, std::max(std::accumulate(c.begin() + from, c.begin() + cut, 0.0),
                                   brute_force(c, stages - 1, cut)));
  return best;
}

// The largest rank load of a V placement (rank r: stages r and stages - 1 - r).
double max_v_rank_cost(const Partition& p, const std::vector<double>& c) {
  const int stages = int(p.first.size());
  auto cost = [&](int s) {
    return std::accumulate(c.begin() + p.begin(s), c.begin() + p.end(s), 0.0);
  };
  double worst = 0;
  for (int r = 0; r < stages / 2; ++r) worst = std::max(worst, cost(r) + cost(stages - 1 - r));
  return worst;
}

// The largest activation memory of a V rank at zbv's peak: rank r holds 2p - r - 1
// micro-batches of its first stage and r + 1 of its second.
double max_v_memory(const Partition& p, const std::vector<double>& c) {
  const int stages = int(p.first.size()), ranks = stages / 2;
  auto cost = [&](int s) {
    return std::accumulate(c.begin() + p.begin(s), c.begin() + p.end(s), 0.0);
  };
  double worst = 0;
  for (int r = 0; r < ranks; ++r)
    worst = std::max(worst, (2 * ranks - r - 1) * cost(r) + (r + 1) * cost(stages - 1 - r));
  return worst;
}

// Exhaustive search over every cut of c into `stages` stages: the least largest V rank load
// L; among the cuts at L, the least largest rank memory M; among those within 5 % of M, the
// least largest stage S.
std::tuple<double, double, double> brute_force_v(const std::vector<double>& c, int stages) {
  const int n = int(c.size());
  std::vector<std::tuple<double, double, double>> all;
  std::vector<int> first(stages, 0);
  std::function<void(int, int)> place = [&](int s, int from) {
    if (s == stages) {
      Partition p;
      p.blocks = n;
      p.first = first;
      all.emplace_back(max_v_rank_cost(p, c), max_v_memory(p, c), max_stage_cost(p, c));
      return;
    }
    for (int at = from; at <= n - (stages - s); ++at) {
      first[s] = at;
      place(s + 1, at + 1);
    }
  };
  place(1, 1);
  double L = 1e300, M = 1e300, S = 1e300;
  for (const auto& [l, m, st] : all) L = std::min(L, l);
  for (const auto& [l, m, st] : all)
    if (l < L + 1e-9) M = std::min(M, m);
  for (const auto& [l, m, st] : all)
    if (l < L + 1e-9 && m < 1.05 * M + 1e-9) S = std::min(S, st);
  return {L, M, S};
}

}  // namespace

TEST(Partition, BalancedIsOptimalAndContiguous) {
  // Heavy embedding and head around uniform layers, as in a GPT.
  std::vector<double> costs = {5, 3, 3, 3, 3, 3, 3, 3, 8};
  for (int stages = 1; stages <= 9; ++stages) {
    Partition p = partition(costs, stages, "flops");
    ASSERT_EQ(int(p.first.size()), stages);
    EXPECT_EQ(p.first[0], 0);
    for (int s = 0; s < stages; ++s) EXPECT_LT(p.begin(s), p.end(s)) << "empty stage " << s;
    EXPECT_DOUBLE_EQ(max_stage_cost(p, costs), brute_force(costs, stages)) << stages;
  }
}

TEST(Partition, UniformGivesExtraBlocksToFirstStages) {
  Partition p = partition(std::vector<double>(9, 1.0), 4, "uniform");
  EXPECT_EQ(p.describe(), "[0,3) [3,5) [5,7) [7,9)");
}

TEST(Partition, ExplicitCutPoints) {
  Partition p = partition(std::vector<double>(6, 1.0), 3, "1,4");
  EXPECT_EQ(p.describe(), "[0,1) [1,4) [4,6)");
}

TEST(Partition, ClearErrors) {
  std::vector<double> c(4, 1.0);
  EXPECT_THROW(partition(c, 5, "flops"), loom::UsageError);  // fewer blocks than stages
  EXPECT_THROW(partition(c, 3, "2,1"), loom::UsageError);    // not increasing
  EXPECT_THROW(partition(c, 3, "1,4"), loom::UsageError);    // out of range
  EXPECT_THROW(partition(c, 3, "1"), loom::UsageError);      // wrong count
  EXPECT_THROW(partition(c, 2, "x"), loom::UsageError);
  try {
    partition(c, 5, "flops");
  } catch (const loom::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("4 blocks"), std::string::npos) << e.what();
  }
}

// V placement: the first and the last stage share rank 0, so balanced stages can leave it far
// less work than the others (a GPT of 6 layers on 2 ranks: [0,2) [2,4) [4,6) [6,8) gives rank 0
// one layer, the embedding, one layer and the head, rank 1 four layers). The V cut minimizes
// the largest rank load, then (within 5 %) the largest rank memory, then the largest stage,
// as an exhaustive search does.
TEST(Partition, VPlacementBalancesRanks) {
  const std::vector<double> gpt = {0.01, 1, 1, 1, 1, 1, 1, 0.15};
  const Partition v = partition(gpt, 4, "flops", /*v_placement=*/true);
  EXPECT_NEAR(max_v_rank_cost(v, gpt), 3.16, 1e-9) << v.describe();
  // Rank 1 holds 2 micro-batches of each of its stages (memory 6 layers' worth), rank 0 three
  // of its first: [0,2) [2,3) [3,5) [5,8) (memory 3 x 1.01 + 2.15), not [0,3) (3 x 2.01 +
  // 1.15); and of those the one with the smaller largest stage (2.15, not [0,1) ... [4,8)).
  EXPECT_NEAR(max_v_memory(v, gpt), 6.0, 1e-9) << v.describe();
  EXPECT_NEAR(max_stage_cost(v, gpt), 2.15, 1e-9) << v.describe();
  // 4 layers: the even cut holds 2 % more memory on rank 0 ((3 x 1 + 1.08) / 4) than
  // [0,1) [1,2) [2,3) [3,6), whose last stage is twice the others.
  const std::vector<double> four = {0.0, 1, 1, 1, 1, 0.08};
  EXPECT_EQ(partition(four, 4, "flops", true).describe(), "[0,2) [2,3) [3,4) [4,6)");
  EXPECT_NEAR(max_v_rank_cost(partition(gpt, 4, "flops"), gpt), 4.0, 1e-9);
  const std::vector<std::vector<double>> cases = {gpt,
                                                  {5, 3, 3, 3, 3, 3, 3, 3, 8},
                                                  {1, 2, 3, 4, 5, 6, 7, 8, 9, 10},
                                                  std::vector<double>(7, 1.0)};
  for (const auto& c : cases)
    for (int stages = 4; stages <= int(c.size()) && stages <= 8; stages += 2) {
      const Partition p = partition(c, stages, "flops", true);
      ASSERT_EQ(int(p.first.size()), stages);
      EXPECT_EQ(p.first[0], 0);
      for (int s = 0; s < stages; ++s) EXPECT_LT(p.begin(s), p.end(s)) << "empty stage " << s;
      const auto [rank, memory, stage] = brute_force_v(c, stages);
      EXPECT_NEAR(max_v_rank_cost(p, c), rank, 1e-6 * c.size())
          << stages << " stages: " << p.describe();
      EXPECT_LE(max_v_memory(p, c), 1.05 * memory + 1e-5 * c.size())
          << stages << " stages: " << p.describe();
      EXPECT_NEAR(max_stage_cost(p, c), stage, 1e-6 * c.size())
          << stages << " stages: " << p.describe();
    }
  // Two stages (one rank) and the other specs are as without the V.
  EXPECT_EQ(partition(gpt, 2, "flops", true).describe(), partition(gpt, 2, "flops").describe());
  EXPECT_EQ(partition(gpt, 4, "uniform", true).describe(), "[0,2) [2,4) [4,6) [6,8)");
}

// A deep model (128 layers between an embedding and a head, 16 ranks): every stage non-empty,
// no rank above what balanced stages give it, and the per-rank loads within one layer.
TEST(Partition, VPlacementOfADeepModel) {
  std::vector<double> c(130, 1.0);
  c.front() = 0.05;
  c.back() = 0.6;
  const Partition v = partition(c, 32, "flops", true);
  for (int s = 0; s < 32; ++s) EXPECT_LT(v.begin(s), v.end(s)) << "empty stage " << s;
  const double total = std::accumulate(c.begin(), c.end(), 0.0);
  EXPECT_LE(max_v_rank_cost(v, c), max_v_rank_cost(partition(c, 32, "flops"), c));
  EXPECT_LE(max_v_rank_cost(v, c), total / 16 + 1.0) << v.describe();
}
