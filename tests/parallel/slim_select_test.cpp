// How Slim-DP picks its coordinates: counts, significance, the core set, and the explorer
// draw, whose uniformity over the non-core coordinates is checked by a chi-square test with a
// fixed seed. The test is shown to reject two broken samplers, so it can fail.
#include "loom/parallel/slim_select.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

using namespace loom::parallel::slim;

namespace {

// Wilson-Hilferty approximation of the chi-square quantile with `df` degrees of freedom at the
// standard normal quantile z.
double chi2_quantile(double df, double z) {
  double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + z * std::sqrt(a), 3);
}

// Pearson statistic of per-coordinate hit counts after `rounds` draws of m out of P. One
// coordinate is hit in a round with probability p = m / P, so its count has mean rounds * p and
// variance rounds * p * (1 - p) (draws within a round are without replacement); dividing by
// that variance makes the statistic chi-square with P - 1 degrees of freedom under uniformity.
double chi_square(const std::vector<int64_t>& counts, int64_t m, int64_t rounds) {
  const double P = static_cast<double>(counts.size());
  const double p = m / P, mean = rounds * p, var = rounds * p * (1 - p);
  double x2 = 0;
  for (auto c : counts) x2 += (c - mean) * (c - mean) / var;
  return x2;
}

// Two-sided at 0.1 %: too uneven (a bias) or too even (not random) both fail.
bool looks_uniform(const std::vector<int64_t>& counts, int64_t m, int64_t rounds, double* x2) {
  const double df = static_cast<double>(counts.size()) - 1;
  *x2 = chi_square(counts, m, rounds);
  return *x2 > chi2_quantile(df, -3.09) && *x2 < chi2_quantile(df, 3.09);
}

constexpr int64_t kN = 1000, kRounds = 4000;

struct Sets {
  std::vector<int64_t> core, pool;
  int64_t m;
};

Sets make_sets() {
  std::vector<float> g(kN), u(kN);
  for (int64_t i = 0; i < kN; ++i) {
    g[i] = std::sin(0.37f * i);
    u[i] = std::cos(1.3f * i) * 0.01f;
  }
  Sets s;
  s.core = top_k(significance(g.data(), u.data(), kN, 1.0), fraction_count(0.2, kN));
  s.pool = complement(s.core, kN);
  s.m = fraction_count(0.1, kN);
  return s;
}

}  // namespace

TEST(SlimSelect, FractionCountIsACeiling) {
  EXPECT_EQ(fraction_count(0.1, 30), 3);  // 0.1 * 30 = 3.0000000000000004 in double
  EXPECT_EQ(fraction_count(0.2, 11), 3);
  EXPECT_EQ(fraction_count(0.0, 11), 0);
  EXPECT_EQ(fraction_count(1.0, 11), 11);
  EXPECT_EQ(fraction_count(0.05, 207), 11);
}

TEST(SlimSelect, SignificanceHandExample) {
  std::vector<float> g = {1.0f, -2.0f, 0.5f, 0.0f};
  std::vector<float> u = {0.0f, 1.0f, -3.0f, 4.0f};  // mean |u| = 2
  auto s = significance(g.data(), u.data(), 4, 2.0);
  EXPECT_FLOAT_EQ(s[0], 1.0f);         // 1 * (1 + 2 * 0 / 2)
  EXPECT_FLOAT_EQ(s[1], 2.0f * 2.0f);  // 2 * (1 + 2 * 1 / 2)
  EXPECT_FLOAT_EQ(s[2], 0.5f * 4.0f);  // 0.5 * (1 + 2 * 3 / 2)
  EXPECT_FLOAT_EQ(s[3], 0.0f);
  auto mag = significance(g.data(), u.data(), 4, 0.0);  // lambda 0: magnitude only
  EXPECT_EQ(mag, (std::vector<float>{1.0f, 2.0f, 0.5f, 0.0f}));
  std::vector<float> zero(4, 0.0f);  // u = 0 (before the first merge): magnitude only
  EXPECT_EQ(significance(g.data(), zero.data(), 4, 5.0), mag);
}

TEST(SlimSelect, TopKBreaksTiesByIndex) {
  std::vector<float> s = {1, 3, 3, 2, 3, NAN, 0};
  EXPECT_EQ(top_k(s, 2), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(top_k(s, 4), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(top_k(s, 6), (std::vector<int64_t>{0, 1, 2, 3, 4, 6}));  // NaN is last
  EXPECT_EQ(top_k(s, 0), (std::vector<int64_t>{}));
  EXPECT_EQ(complement({1, 2, 5}, 7), (std::vector<int64_t>{0, 3, 4, 6}));
}

TEST(SlimSelect, ExplorerDependsOnlyOnSeedAndRestoresPool) {
  Sets s = make_sets();
  auto pool0 = s.pool;
  auto a = draw(s.pool, s.m, explorer_seed(7, 0, 3));
  EXPECT_EQ(s.pool, pool0);
  draw(s.pool, s.m, explorer_seed(7, 0, 4));
  EXPECT_EQ(draw(s.pool, s.m, explorer_seed(7, 0, 3)), a);
  EXPECT_NE(draw(s.pool, s.m, explorer_seed(7, 1, 3)), a);  // another stage, another set
  EXPECT_NE(draw(s.pool, s.m, explorer_seed(8, 0, 3)), a);  // another run seed
  // draw_into: the same elements, in draw order, with reusable buffers.
  std::vector<int64_t> out, swaps;
  draw_into(s.pool, s.m, explorer_seed(7, 0, 3), out, swaps);
  EXPECT_EQ(s.pool, pool0);
  std::sort(out.begin(), out.end());
  EXPECT_EQ(out, a);
  std::vector<uint8_t> mask = {0, 1, 1, 0, 0, 1};
  indices_of(mask, out);
  EXPECT_EQ(out, (std::vector<int64_t>{1, 2, 5}));
}

TEST(SlimSelect, ExplorerIsDisjointFromCoreAndUniformOverTheRest) {
  Sets s = make_sets();
  ASSERT_EQ(s.core.size(), 200u);
  ASSERT_EQ(s.pool.size(), 800u);
  std::set<int64_t> core(s.core.begin(), s.core.end());
  std::vector<int64_t> pos(kN, -1);  // coordinate -> position in the pool
  for (size_t k = 0; k < s.pool.size(); ++k) pos[s.pool[k]] = static_cast<int64_t>(k);
  std::vector<int64_t> counts(s.pool.size(), 0);
  for (int64_t r = 0; r < kRounds; ++r) {
    auto e = draw(s.pool, s.m, explorer_seed(1234, 0, r));
    ASSERT_EQ(static_cast<int64_t>(e.size()), s.m);
    for (size_t k = 0; k < e.size(); ++k) {
      ASSERT_EQ(core.count(e[k]), 0u) << "explorer coordinate " << e[k] << " is in the core";
      if (k) {
        ASSERT_LT(e[k - 1], e[k]);  // ascending, so distinct
      }
      ++counts[pos[e[k]]];
    }
    auto all = merge(s.core, e);
    ASSERT_EQ(all.size(), s.core.size() + e.size());
  }
  double x2;
  EXPECT_TRUE(looks_uniform(counts, s.m, kRounds, &x2)) << "chi-square " << x2;
  std::printf("[ slim ] explorer chi-square %.1f with %zu degrees of freedom (accept %.1f..%.1f)\n",
              x2, counts.size() - 1, chi2_quantile(799, -3.09), chi2_quantile(799, 3.09));
}

// The same test rejects a sampler that never picks one coordinate and one that walks the pool
// in a fixed rotation (perfectly even, not random).
TEST(SlimSelect, ChiSquareRejectsBrokenSamplers) {
  Sets s = make_sets();
  std::vector<int64_t> short_pool(s.pool.begin(), s.pool.end() - 1);
  std::vector<int64_t> counts(s.pool.size(), 0);
  for (int64_t r = 0; r < kRounds; ++r) {
    auto e = draw(short_pool, s.m, explorer_seed(1234, 0, r));
    for (auto i : e) ++counts[std::lower_bound(s.pool.begin(), s.pool.end(), i) - s.pool.begin()];
  }
  double x2;
  EXPECT_FALSE(looks_uniform(counts, s.m, kRounds, &x2))
      << "missed one coordinate, chi-square " << x2;
  std::printf("[ slim ] chi-square of a sampler that misses one coordinate: %.1f (rejected)\n", x2);
  std::fill(counts.begin(), counts.end(), 0);
  const int64_t P = static_cast<int64_t>(s.pool.size());
  for (int64_t r = 0; r < kRounds; ++r)
    for (int64_t k = 0; k < s.m; ++k) ++counts[(r * s.m + k) % P];
  EXPECT_FALSE(looks_uniform(counts, s.m, kRounds, &x2)) << "rotation, chi-square " << x2;
  std::printf("[ slim ] chi-square of a fixed rotation: %.1f (rejected)\n", x2);
}

TEST(SlimSelect, HashDiffersWhenSetsDiffer) {
  EXPECT_EQ(hash_indices({1, 2, 3}), hash_indices({1, 2, 3}));
  EXPECT_NE(hash_indices({1, 2, 3}), hash_indices({1, 2, 4}));
  EXPECT_NE(hash_indices({}), hash_indices({0}));
}
