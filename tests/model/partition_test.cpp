#include "loom/model/partition.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

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
