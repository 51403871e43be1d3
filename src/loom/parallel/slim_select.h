#pragma once
// How Slim-DP chooses the coordinates it synchronizes (pure functions, no torch, no MPI).
// Every input is state that all ranks hold bit for bit (the global copy g, the running merged
// update u, the seed and the sync round), and every function is sequential and fully ordered
// (ties broken by index), so every rank computes the same sets without exchanging indices.
#include <cstdint>
#include <vector>

namespace loom::parallel::slim {

// ceil(fraction * n), clamped to [0, n]; a tiny slack keeps 0.1 * 30 at 3, not 4.
int64_t fraction_count(double fraction, int64_t n);

// s_i = |g_i| * (1 + lambda * |u_i| / mean_j |u_j|); magnitude only when lambda == 0 or u == 0.
// The mean is accumulated in double, sequentially (independent of thread counts).
std::vector<float> significance(const float* g, const float* u, int64_t n, double lambda);

// Indices of the k largest scores (ties: the lower index wins), ascending.
std::vector<int64_t> top_k(const std::vector<float>& score, int64_t k);

// [0, n) minus `sorted` (ascending, distinct), ascending.
std::vector<int64_t> complement(const std::vector<int64_t>& sorted, int64_t n);

// m distinct elements of `pool` drawn uniformly without replacement (partial Fisher-Yates driven
// by splitmix64 from `seed`), in draw order, into `out`; `swaps` is scratch space (reused
// between calls: no allocation per sync). The pool's order is restored before returning, so the
// result depends only on (pool, m, seed), never on earlier draws.
void draw_into(std::vector<int64_t>& pool, int64_t m, uint64_t seed, std::vector<int64_t>& out,
               std::vector<int64_t>& swaps);
// The same draw, ascending.
std::vector<int64_t> draw(std::vector<int64_t>& pool, int64_t m, uint64_t seed);

// Ascending indices i with mask[i] != 0, into `out` (a linear scan: cheaper than sorting).
void indices_of(const std::vector<uint8_t>& mask, std::vector<int64_t>& out);

// Seed of the explorer draw of sync `round` of stage `stage` in a run with seed `run_seed`.
uint64_t explorer_seed(uint64_t run_seed, int stage, int64_t round);

// Union of two disjoint ascending index lists, ascending.
std::vector<int64_t> merge(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

// FNV-1a over the indices (tests compare it across ranks).
uint64_t hash_indices(const std::vector<int64_t>& idx);

}  // namespace loom::parallel::slim
