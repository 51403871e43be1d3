#include "loom/data/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "loom/common/error.h"

namespace loom::data {
namespace {

bool is_permutation_of_range(std::vector<int64_t> v, int64_t n) {
  std::sort(v.begin(), v.end());
  std::vector<int64_t> expect(n);
  std::iota(expect.begin(), expect.end(), 0);
  return v == expect;
}

TEST(Splitmix64, KnownValues) {
  // Reference values of splitmix64 from state 0 (as in Vigna's splitmix64.c).
  uint64_t state = 0;
  EXPECT_EQ(splitmix64(state), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(splitmix64(state), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(splitmix64(state), 0x06c45d188009454fULL);
}

TEST(Sampler, EachEpochIsAPermutation) {
  Sampler s(1000, 42);
  EXPECT_EQ(s.size(), 1000);
  for (int64_t e = 0; e < 3; ++e) {
    const auto epoch = s.indices(e * 1000, 1000);
    EXPECT_TRUE(is_permutation_of_range(epoch, 1000)) << "epoch " << e;
  }
  // Shuffled, and differently in each epoch.
  const auto e0 = s.indices(0, 1000);
  const auto e1 = s.indices(1000, 1000);
  std::vector<int64_t> identity(1000);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_NE(e0, identity);
  EXPECT_NE(e0, e1);
}

TEST(Sampler, SeedDecidesOrder) {
  Sampler a(500, 7), b(500, 7), c(500, 8);
  EXPECT_EQ(a.indices(0, 1500), b.indices(0, 1500));
  EXPECT_NE(a.indices(0, 500), c.indices(0, 500));
  // The cache does not change answers: query epochs out of order.
  const auto later = a.indices(2000, 10);
  a.indices(0, 10);
  EXPECT_EQ(a.indices(2000, 10), later);
  EXPECT_EQ(b.indices(2000, 10), later);
}

TEST(Sampler, NoShuffleIsIdentity) {
  Sampler s(10, 123, /*shuffle=*/false);
  EXPECT_EQ(s.indices(0, 4), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(s.indices(8, 5), (std::vector<int64_t>{8, 9, 0, 1, 2}));
  EXPECT_EQ(s.microbatch(1, 4, 2, 1, 1, 0), (std::vector<int64_t>{6, 7}));
}

TEST(Sampler, EpochBoundaryCrossing) {
  Sampler s(10, 3);
  const auto e0 = s.indices(0, 10);
  const auto e1 = s.indices(10, 10);
  const auto across = s.indices(7, 6);  // 3 from epoch 0, then 3 from epoch 1
  EXPECT_EQ(across, (std::vector<int64_t>{e0[7], e0[8], e0[9], e1[0], e1[1], e1[2]}));
  // A step of global batch 4 crosses the boundary at step 2 (positions 8..11).
  Sampler t(10, 3);
  EXPECT_EQ(t.microbatch(2, 4, 1, 0, 1, 0), (std::vector<int64_t>{e0[8], e0[9], e1[0], e1[1]}));
  // Counts larger than an epoch.
  const auto many = s.indices(5, 25);
  const auto e2 = s.indices(20, 10);
  ASSERT_EQ(many.size(), 25u);
  EXPECT_EQ(many[0], e0[5]);
  EXPECT_EQ(many[5], e1[0]);
  EXPECT_EQ(many[24], e2[9]);
}

TEST(Sampler, MicrobatchesDoNotDependOnDpOrM) {
  const int64_t global_batch = 24;
  Sampler s(100, 99);
  for (int64_t step : {0, 3, 4, 9}) {
    const auto expect = Sampler(100, 99).indices(step * global_batch, global_batch);
    for (int dp : {1, 2, 3, 4}) {
      for (int m : {1, 2, 3, 6}) {
        if (global_batch % (dp * m) != 0) continue;
        std::vector<int64_t> got;
        for (int r = 0; r < dp; ++r) {
          for (int j = 0; j < m; ++j) {
            const auto mb = s.microbatch(step, global_batch, dp, r, m, j);
            EXPECT_EQ(static_cast<int64_t>(mb.size()), global_batch / (dp * m));
            got.insert(got.end(), mb.begin(), mb.end());
          }
        }
        EXPECT_EQ(got, expect) << "step " << step << " dp " << dp << " m " << m;
      }
    }
  }
}

TEST(Sampler, RejectsBadArguments) {
  EXPECT_THROW(Sampler(0, 1), Error);
  Sampler s(10, 1);
  EXPECT_THROW(s.indices(-1, 2), Error);
  EXPECT_THROW(s.indices(0, -2), Error);
  EXPECT_THROW(s.microbatch(0, 10, 3, 0, 1, 0), Error);  // 10 not divisible by 3
  EXPECT_THROW(s.microbatch(0, 8, 2, 2, 1, 0), Error);   // dp_rank out of range
  EXPECT_THROW(s.microbatch(0, 8, 2, 0, 2, 2), Error);   // j out of range
  EXPECT_THROW(s.microbatch(-1, 8, 2, 0, 2, 0), Error);
  EXPECT_THROW(s.microbatch(0, 8, 0, 0, 2, 0), Error);
  EXPECT_TRUE(s.indices(3, 0).empty());
}

}  // namespace
}  // namespace loom::data
