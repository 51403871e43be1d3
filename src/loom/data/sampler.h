#pragma once
// Global sample order: the data a step uses depends only on (seed, step, global batch), never on
// dp, pp, micro-batches or the schedule. Position p = step * global_batch + k (k < global_batch)
// maps to epoch e = p / n and to perm_e[p % n], where perm_e is a Fisher-Yates permutation of
// [0, n) driven by a splitmix64 generator seeded with (seed, e) (portable, no std:: distributions).
#include <cstdint>
#include <vector>

namespace loom::data {

class Sampler {
 public:
  Sampler(int64_t dataset_size, uint64_t seed, bool shuffle = true);
  // Sample indices of global positions [first, first + count).
  std::vector<int64_t> indices(int64_t first, int64_t count) const;
  // Samples of replica `dp_rank` (of dp) for micro-batch j (of m) in `step`:
  // global positions step*G + (dp_rank*m + j)*b + [0, b), with G = dp*m*b.
  std::vector<int64_t> microbatch(int64_t step, int64_t global_batch, int dp, int dp_rank, int m,
                                  int j) const;
  int64_t size() const { return n_; }

 private:
  const std::vector<int64_t>& permutation(int64_t epoch) const;
  int64_t n_;
  uint64_t seed_;
  bool shuffle_;
  mutable int64_t cached_epoch_ = -1;
  mutable std::vector<int64_t> cached_perm_;
};

// splitmix64: the portable generator loom uses wherever all ranks must draw the same numbers.
uint64_t splitmix64(uint64_t& state);

}  // namespace loom::data
