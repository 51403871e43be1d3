#include "loom/parallel/slim_select.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "loom/common/error.h"
#include "loom/data/rng.h"

namespace loom::parallel::slim {

int64_t fraction_count(double fraction, int64_t n) {
  auto k = static_cast<int64_t>(std::ceil(fraction * static_cast<double>(n) - 1e-9));
  return std::clamp<int64_t>(k, 0, n);
}

std::vector<float> significance(const float* g, const float* u, int64_t n, double lambda) {
  double mean_u = 0;
  if (lambda > 0) {
    for (int64_t i = 0; i < n; ++i) mean_u += std::fabs(u[i]);
    mean_u /= static_cast<double>(std::max<int64_t>(n, 1));
  }
  std::vector<float> s(n);
  if (!(mean_u > 0)) {
    for (int64_t i = 0; i < n; ++i) s[i] = std::fabs(g[i]);
    return s;
  }
  const double w = lambda / mean_u;
  for (int64_t i = 0; i < n; ++i)
    s[i] = static_cast<float>(std::fabs(g[i]) * (1.0 + w * std::fabs(u[i])));
  return s;
}

std::vector<int64_t> top_k(const std::vector<float>& score, int64_t k) {
  const auto n = static_cast<int64_t>(score.size());
  k = std::clamp<int64_t>(k, 0, n);
  std::vector<int64_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  // A strict total order (score descending, then index ascending): the selected set does not
  // depend on how nth_element happens to visit equal scores. NaN counts as the smallest score.
  auto better = [&](int64_t a, int64_t b) {
    float sa = score[a], sb = score[b];
    bool na = sa != sa, nb = sb != sb;
    if (na != nb) return nb;
    if (!na && sa != sb) return sa > sb;
    return a < b;
  };
  if (k < n) std::nth_element(idx.begin(), idx.begin() + k, idx.end(), better);
  std::vector<uint8_t> mask(n, 0);
  for (int64_t j = 0; j < k; ++j) mask[idx[j]] = 1;
  indices_of(mask, idx);
  return idx;
}

void indices_of(const std::vector<uint8_t>& mask, std::vector<int64_t>& out) {
  const auto n = static_cast<int64_t>(mask.size());
  out.resize(n);  // capacity is kept between calls
  int64_t k = 0;
  for (int64_t i = 0; i < n; ++i) {  // branch-free: the explorer makes the mask unpredictable
    out[k] = i;
    k += mask[i] != 0;
  }
  out.resize(k);
}

std::vector<int64_t> complement(const std::vector<int64_t>& sorted, int64_t n) {
  std::vector<int64_t> out;
  out.reserve(n - static_cast<int64_t>(sorted.size()));
  size_t j = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (j < sorted.size() && sorted[j] == i) {
      ++j;
      continue;
    }
    out.push_back(i);
  }
  return out;
}

void draw_into(std::vector<int64_t>& pool, int64_t m, uint64_t seed, std::vector<int64_t>& out,
               std::vector<int64_t>& swaps) {
  const auto p = static_cast<int64_t>(pool.size());
  LOOM_CHECK(m >= 0 && m <= p, "cannot draw ", m, " of ", p, " coordinates");
  swaps.resize(m);
  uint64_t state = seed;
  for (int64_t i = 0; i < m; ++i) {
    auto j = i + static_cast<int64_t>(data::detail::uniform_below(state, uint64_t(p - i)));
    std::swap(pool[i], pool[j]);
    swaps[i] = j;
  }
  out.assign(pool.begin(), pool.begin() + m);
  for (int64_t i = m - 1; i >= 0; --i) std::swap(pool[i], pool[swaps[i]]);  // undo
}

std::vector<int64_t> draw(std::vector<int64_t>& pool, int64_t m, uint64_t seed) {
  std::vector<int64_t> out, swaps;
  draw_into(pool, m, seed, out, swaps);
  std::sort(out.begin(), out.end());
  return out;
}

uint64_t explorer_seed(uint64_t run_seed, int stage, int64_t round) {
  return data::detail::mix_seed(data::detail::mix_seed(run_seed, 0x511Dull + stage),
                                static_cast<uint64_t>(round));
}

std::vector<int64_t> merge(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> out(a.size() + b.size());
  std::merge(a.begin(), a.end(), b.begin(), b.end(), out.begin());
  return out;
}

uint64_t hash_indices(const std::vector<int64_t>& idx) {
  uint64_t h = 1469598103934665603ull;
  for (int64_t v : idx)
    for (int byte = 0; byte < 8; ++byte) {
      h ^= (static_cast<uint64_t>(v) >> (8 * byte)) & 0xFF;
      h *= 1099511628211ull;
    }
  return h;
}

}  // namespace loom::parallel::slim
