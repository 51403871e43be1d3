// zb-h1 (Qi et al. 2023, ZB-H1): 1F1B with the backward split into I (input gradient, on the
// critical path) and W (weight gradient, free to move). Rank r runs 1F1B's warm-up of
// p - 1 - r forwards and its steady state with I in place of B, and delays its W's by r
// micro-batches: after I(j) comes W(j - r), the last r W's after the last I. Every rank thus
// holds up to min(p, m) micro-batches between F and W, the most 1F1B's first rank holds, of
// which the later ones have given up all but their weight products' inputs and output
// gradients. The later ranks' I's run sooner, the earlier ranks receive theirs sooner, and
// the delayed W's fill the cool-down: with F = I = W the makespan is m(F + I + W) +
// (p - 1)(F + I - W), a third of 1F1B's bubble.
#include <algorithm>

#include "loom/schedule/generators.h"

namespace loom::schedule::detail {

Schedule gen_zb_h1(const Shape& shape) {
  Schedule s = empty_schedule("zb-h1", shape);
  const int p = shape.pp;
  const int m = shape.microbatches;
  for (int r = 0; r < p; ++r) {
    std::vector<Action>& list = s.ranks[r];
    const int warmup = std::min(p - 1 - r, m);
    for (int j = 0; j < warmup; ++j) list.push_back({r, Kind::F, j});
    int next_w = 0;
    for (int j = 0; j < m; ++j) {
      if (j + warmup < m) list.push_back({r, Kind::F, j + warmup});
      list.push_back({r, Kind::I, j});
      if (j - next_w >= r) list.push_back({r, Kind::W, next_w++});
    }
    while (next_w < m) list.push_back({r, Kind::W, next_w++});
  }
  return s;
}

}  // namespace loom::schedule::detail
