// zbv: the V-shaped zero-bubble schedule (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR
// 2024, ZB-V). Two stages per rank in V placement: rank r holds chunk 0 = stage r and chunk 1 =
// stage 2p-1-r, so the forward goes down the ranks and comes back up, and the backward retraces
// it. The backward is split into I and W. Rank r's list, in three phases (micro-batches taken
// in order per chunk and kind; with n = max(m, 2p-1) micro-batches, the actions of the ones
// past m are dropped, which keeps the order valid for any m):
//   warm-up    2(p-r)-1 forwards of chunk 0; then r times F1, F0; then p-r times F1, I1, W1
//              (the last rank's chunk 1 starts its backwards as soon as its forwards arrive);
//   steady     F0 (while any is left), I0, W0, F1, I1, W1, until every forward is done;
//   cool-down  r times I0, I1; then p-r times I0, W0; then the W's left, chunk 1's first.
// Each W runs right after its I in the warm-up and the steady state, which holds the rank at
// 2p live (stage, micro-batch) pairs (= the first rank of 1F1B, whose stages are twice as big);
// the cool-down defers W's so the input gradients reach rank 0 without waiting. With F = I = W
// the makespan is max(6m + p - 1, 4m + 4p - 2): no idle time but the p - 1 units the last
// rank waits for its first forward once m >= (3p - 1) / 2 (docs/schedules.md, tested exactly).
#include <algorithm>

#include "loom/schedule/generators.h"

namespace loom::schedule::detail {

Schedule gen_zbv(const Shape& shape) {
  Schedule s = empty_schedule("zbv", shape);
  const int p = shape.pp;
  const int m = shape.microbatches;
  const int n = std::max(m, 2 * p - 1);
  for (int r = 0; r < p; ++r) {
    const int chunk[2] = {r, 2 * p - 1 - r};
    int nf[2] = {0, 0}, ni[2] = {0, 0}, nw[2] = {0, 0};
    std::vector<Action>& list = s.ranks[r];
    auto add = [&](int c, Kind k) {
      int* count = k == Kind::F ? nf : k == Kind::I ? ni : nw;
      const int j = count[c]++;
      if (j < m) list.push_back({chunk[c], k, j});
    };
    for (int k = 0; k < 2 * (p - r) - 1; ++k) add(0, Kind::F);
    for (int k = 0; k < r; ++k) {
      add(1, Kind::F);
      add(0, Kind::F);
    }
    for (int k = 0; k < p - r; ++k) {
      add(1, Kind::F);
      add(1, Kind::I);
      add(1, Kind::W);
    }
    while (nf[0] < n || nf[1] < nf[0]) {
      if (nf[0] < n) add(0, Kind::F);
      add(0, Kind::I);
      add(0, Kind::W);
      add(1, Kind::F);
      add(1, Kind::I);
      add(1, Kind::W);
    }
    for (int k = 0; k < r; ++k) {
      add(0, Kind::I);
      add(1, Kind::I);
    }
    for (int k = 0; k < p - r; ++k) {
      add(0, Kind::I);
      add(0, Kind::W);
    }
    while (nw[1] < ni[1]) add(1, Kind::W);
    while (nw[0] < ni[0]) add(0, Kind::W);
  }
  return s;
}

}  // namespace loom::schedule::detail
