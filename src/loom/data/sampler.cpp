#include "loom/data/sampler.h"

#include <algorithm>
#include <numeric>

#include "loom/common/error.h"
#include "loom/data/rng.h"

namespace loom::data {

uint64_t splitmix64(uint64_t& state) {
  state += 0x9e3779b97f4a7c15ULL;
  uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

Sampler::Sampler(int64_t dataset_size, uint64_t seed, bool shuffle)
    : n_(dataset_size), seed_(seed), shuffle_(shuffle) {
  LOOM_CHECK_GT(dataset_size, 0, "a sampler needs a non-empty dataset");
}

const std::vector<int64_t>& Sampler::permutation(int64_t epoch) const {
  if (epoch == cached_epoch_) return cached_perm_;
  cached_perm_.resize(n_);
  std::iota(cached_perm_.begin(), cached_perm_.end(), int64_t{0});
  uint64_t state = detail::mix_seed(seed_, static_cast<uint64_t>(epoch));
  for (int64_t i = n_ - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(detail::uniform_below(state, static_cast<uint64_t>(i + 1)));
    std::swap(cached_perm_[i], cached_perm_[j]);
  }
  cached_epoch_ = epoch;
  return cached_perm_;
}

std::vector<int64_t> Sampler::indices(int64_t first, int64_t count) const {
  LOOM_CHECK_GE(first, 0);
  LOOM_CHECK_GE(count, 0);
  std::vector<int64_t> out;
  out.reserve(count);
  int64_t p = first;
  const int64_t end = first + count;
  while (p < end) {
    // Copy the run of positions that stays inside one epoch.
    const int64_t epoch = p / n_;
    const int64_t run_end = std::min(end, (epoch + 1) * n_);
    if (!shuffle_) {
      for (; p < run_end; ++p) out.push_back(p % n_);
    } else {
      const auto& perm = permutation(epoch);
      for (; p < run_end; ++p) out.push_back(perm[p % n_]);
    }
  }
  return out;
}

std::vector<int64_t> Sampler::microbatch(int64_t step, int64_t global_batch, int dp, int dp_rank,
                                         int m, int j) const {
  LOOM_CHECK_GE(step, 0);
  LOOM_CHECK_GE(dp, 1);
  LOOM_CHECK_GE(m, 1);
  LOOM_CHECK(dp_rank >= 0 && dp_rank < dp, "dp_rank ", dp_rank, " of dp ", dp);
  LOOM_CHECK(j >= 0 && j < m, "micro-batch ", j, " of m ", m);
  LOOM_CHECK_GT(global_batch, 0);
  LOOM_CHECK_EQ(global_batch % (int64_t{dp} * m), 0,
                "global batch must split evenly into dp * m micro-batches");
  const int64_t b = global_batch / (int64_t{dp} * m);
  return indices(step * global_batch + (int64_t{dp_rank} * m + j) * b, b);
}

}  // namespace loom::data
