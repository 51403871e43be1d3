// Gradient bucketing, without MPI or libtorch: which parameters share a bucket, and when a
// bucket is complete during the armed backward.
#include "loom/parallel/grad_buckets.h"

#include <gtest/gtest.h>

#include <algorithm>

using loom::parallel::GradBuckets;

TEST(GradBuckets, ReverseOrderUnderTheCap) {
  // Parameters 0..4 of 10, 20, 30, 40, 50 elements, cap 60, from the last one back: {4}
  // (50 + 40 > 60), {3} (40 + 30 > 60), {2, 1} (30 + 20 = 50; + 10 = 60 fits too), so {2, 1, 0}.
  GradBuckets g({10, 20, 30, 40, 50}, 60);
  ASSERT_EQ(g.size(), 3);
  EXPECT_EQ(g.buckets()[0].params, (std::vector<int>{4}));
  EXPECT_EQ(g.buckets()[1].params, (std::vector<int>{3}));
  EXPECT_EQ(g.buckets()[2].params, (std::vector<int>{2, 1, 0}));
  EXPECT_EQ(g.buckets()[2].numel, 60);
  for (int i = 0; i < 5; ++i) {
    const auto& p = g.buckets()[g.bucket_of(i)].params;
    EXPECT_NE(std::find(p.begin(), p.end(), i), p.end()) << i;
  }
}

TEST(GradBuckets, EveryParameterOnceAndSizesAddUp) {
  const std::vector<int64_t> numels = {7, 1, 1000, 3, 3, 3, 250, 0, 12};
  for (int64_t cap : {1, 5, 10, 256, 1000, 100000}) {
    GradBuckets g(numels, cap);
    std::vector<int> seen(numels.size(), 0);
    int last = static_cast<int>(numels.size());
    for (const auto& b : g.buckets()) {
      int64_t sum = 0;
      for (int i : b.params) {
        ++seen[i];
        EXPECT_EQ(i, last - 1) << "buckets hold consecutive parameters, descending";
        last = i;
        sum += numels[i];
      }
      EXPECT_EQ(sum, b.numel);
      // Over the cap only when a single parameter is larger than the cap.
      if (b.numel > cap) {
        EXPECT_EQ(b.params.size(), 1u) << "cap " << cap;
      }
      EXPECT_FALSE(b.params.empty());
    }
    for (size_t i = 0; i < numels.size(); ++i) EXPECT_EQ(seen[i], 1) << i;
  }
}

TEST(GradBuckets, CapFromMebibytes) {
  EXPECT_EQ(GradBuckets::cap_elements(25.0, 4), 25 * (1 << 20) / 4);
  EXPECT_EQ(GradBuckets::cap_elements(0.0, 4), 1);
  EXPECT_EQ(GradBuckets::cap_elements(1.0, 2), 1 << 19);
}

TEST(GradBuckets, CompleteOnceWhileArmed) {
  GradBuckets g({10, 20, 30, 40}, 50);  // {3}, {2, 1}, {0}
  ASSERT_EQ(g.size(), 3);
  EXPECT_EQ(g.ready(3), -1) << "not armed: nothing starts";
  g.arm();
  EXPECT_EQ(g.ready(3), 0);
  EXPECT_EQ(g.ready(1), -1);
  EXPECT_EQ(g.ready(2), 1);
  EXPECT_EQ(g.ready(2), -1) << "a bucket completes once";
  g.disarm();
  EXPECT_EQ(g.ready(0), -1) << "disarmed at REDUCE_GRAD";
  g.arm();  // the next step starts from zero
  EXPECT_EQ(g.ready(2), -1);
  EXPECT_EQ(g.ready(1), 1);
  EXPECT_EQ(g.ready(0), 2);
}
