#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "loom/common/error.h"
#include "loom/data/dataset.h"

namespace loom::data {
namespace {

// Sample `i` of `ds` taken out of a batch that holds it at position `at` among other samples.
Batch sample_within(const Dataset& ds, int64_t i, const std::vector<int64_t>& others, size_t at) {
  std::vector<int64_t> idx = others;
  idx.insert(idx.begin() + at, i);
  Batch b = ds.get(idx);
  const int64_t n = static_cast<int64_t>(idx.size());
  Batch one;
  for (auto [src, dst] : {std::pair{&b.input, &one.input}, std::pair{&b.target, &one.target}}) {
    const int64_t per = src->numel() / n;
    dst->type = src->type;
    dst->shape = src->shape;
    dst->shape[0] = 1;
    if (src->type == ElemType::Float32) {
      dst->f32.assign(src->f32.begin() + at * per, src->f32.begin() + (at + 1) * per);
    } else {
      dst->i64.assign(src->i64.begin() + at * per, src->i64.begin() + (at + 1) * per);
    }
  }
  return one;
}

void expect_same(const Batch& a, const Batch& b) {
  EXPECT_EQ(a.input.shape, b.input.shape);
  EXPECT_EQ(a.input.f32, b.input.f32);
  EXPECT_EQ(a.input.i64, b.input.i64);
  EXPECT_EQ(a.target.shape, b.target.shape);
  EXPECT_EQ(a.target.i64, b.target.i64);
}

TEST(SyntheticClassification, ShapesAndDeterminism) {
  auto ds = synthetic_classification({1, 28, 28}, 10, 1000, 5);
  EXPECT_EQ(ds->size(), 1000);
  Batch b = ds->get(std::vector<int64_t>{3, 999});
  EXPECT_EQ(b.input.type, ElemType::Float32);
  EXPECT_EQ(b.input.shape, (std::vector<int64_t>{2, 1, 28, 28}));
  EXPECT_EQ(b.target.type, ElemType::Int64);
  EXPECT_EQ(b.target.shape, (std::vector<int64_t>{2}));
  const Batch alone = ds->get(std::vector<int64_t>{42});
  expect_same(alone, sample_within(*ds, 42, {1, 2, 3}, 0));
  expect_same(alone, sample_within(*ds, 42, {7, 900, 42, 0}, 3));
  expect_same(alone,
              synthetic_classification({1, 28, 28}, 10, 1000, 5)->get(std::vector<int64_t>{42}));
  // Another seed gives other data.
  EXPECT_NE(
      alone.input.f32,
      synthetic_classification({1, 28, 28}, 10, 1000, 6)->get(std::vector<int64_t>{42}).input.f32);
  // Sample i does not depend on the dataset size either.
  expect_same(alone,
              synthetic_classification({1, 28, 28}, 10, 50, 5)->get(std::vector<int64_t>{42}));
}

TEST(SyntheticClassification, InputsLookNormalAndEveryClassOccurs) {
  auto ds = synthetic_classification({16}, 4, 4000, 11);
  std::vector<int64_t> idx(4000);
  std::iota(idx.begin(), idx.end(), 0);
  Batch b = ds->get(idx);
  double sum = 0, sq = 0;
  for (float x : b.input.f32) {
    sum += x;
    sq += double{x} * x;
  }
  const double n = static_cast<double>(b.input.f32.size());
  EXPECT_NEAR(sum / n, 0.0, 0.05);
  EXPECT_NEAR(sq / n, 1.0, 0.05);
  std::vector<int64_t> histogram(4, 0);
  for (int64_t l : b.target.i64) {
    ASSERT_GE(l, 0);
    ASSERT_LT(l, 4);
    ++histogram[l];
  }
  for (int64_t h : histogram) EXPECT_GT(h, 4000 / 4 / 4);  // no class is (nearly) absent
}

TEST(SyntheticTokens, ShapesRangeShiftAndDeterminism) {
  auto ds = synthetic_tokens(50, 16, 300, 9);
  EXPECT_EQ(ds->size(), 300);
  std::vector<int64_t> idx(300);
  std::iota(idx.begin(), idx.end(), 0);
  Batch b = ds->get(idx);
  EXPECT_EQ(b.input.shape, (std::vector<int64_t>{300, 16}));
  EXPECT_EQ(b.target.shape, (std::vector<int64_t>{300, 16}));
  for (int64_t k = 0; k < 300; ++k) {
    for (int64_t t = 0; t < 16; ++t) {
      ASSERT_GE(b.input.i64[k * 16 + t], 0);
      ASSERT_LT(b.input.i64[k * 16 + t], 50);
      if (t + 1 < 16) {
        ASSERT_EQ(b.target.i64[k * 16 + t], b.input.i64[k * 16 + t + 1]);
      }
    }
  }
  const Batch alone = ds->get(std::vector<int64_t>{17});
  expect_same(alone, sample_within(*ds, 17, {0, 299, 5}, 2));
  expect_same(alone, synthetic_tokens(50, 16, 300, 9)->get(std::vector<int64_t>{17}));
}

TEST(SyntheticTokens, PatternIsLearnable) {
  // The next token is a fixed function of the current one, except for a few noisy tokens: the
  // most frequent successor of each token should explain nearly all transitions.
  const int64_t vocab = 20;
  auto ds = synthetic_tokens(vocab, 32, 500, 1);
  std::vector<int64_t> idx(500);
  std::iota(idx.begin(), idx.end(), 0);
  Batch b = ds->get(idx);
  std::vector<int64_t> counts(vocab * vocab, 0);
  for (size_t p = 0; p < b.input.i64.size(); ++p) {
    ++counts[b.input.i64[p] * vocab + b.target.i64[p]];
  }
  int64_t explained = 0;
  for (int64_t t = 0; t < vocab; ++t) {
    explained += *std::max_element(counts.begin() + t * vocab, counts.begin() + (t + 1) * vocab);
  }
  const double rate = static_cast<double>(explained) / static_cast<double>(b.input.i64.size());
  EXPECT_GT(rate, 0.9);
  EXPECT_LT(rate, 1.0);  // some noise is there
}

TEST(Synthetic, RejectsBadArguments) {
  EXPECT_THROW(synthetic_classification({}, 10, 10, 1), UsageError);
  EXPECT_THROW(synthetic_classification({0, 2}, 10, 10, 1), UsageError);
  EXPECT_THROW(synthetic_classification({4}, 1, 10, 1), UsageError);
  EXPECT_THROW(synthetic_classification({4}, 2, 0, 1), UsageError);
  EXPECT_THROW(synthetic_tokens(1, 4, 10, 1), UsageError);
  EXPECT_THROW(synthetic_tokens(4, 0, 10, 1), UsageError);
  EXPECT_THROW(synthetic_tokens(4, 4, 0, 1), UsageError);
}

}  // namespace
}  // namespace loom::data
