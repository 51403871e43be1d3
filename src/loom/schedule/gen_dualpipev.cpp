// dualpipev: DeepSeek's DualPipe cut in half (DualPipeV; PyTorch's ScheduleDualPipeV). V
// placement like zbv (rank r holds chunk 0 = stage r and chunk 1 = stage 2p-1-r), but in the
// steady state each forward of one chunk is paired with a full backward (B) of the other, the
// pairs DualPipe overlaps to hide communication (loom runs a pair one after the other). The
// I/W split is used where it fills bubbles: in the warm-up and the cool-down. Rank r's list:
//   1. 2(p-r-1) forwards of chunk 0;
//   2. r+1 times F0, F1;
//   3. p-r-1 times I1, the oldest pending W, F1;
//   4. m-2p+r+1 times F0 B1, F1 B0 (the steady state);
//   5. p-r-1 times B1, F1 B0;
//   6. r+1 times a backward of chunk 1 then of chunk 0, B until the middle of the phase, then I
//      (for odd ranks chunk 1 switches first);
//   7. p-r-1 times the oldest pending W, I0;
//   8. the pending W's.
// Needs m >= 2p (phase 4 runs at least once on rank 0). Every rank holds at most 2p+1 live
// (stage, micro-batch) pairs; with F = I = W = 1, B = 2 the makespan is 6m + p - 1, zbv's
// for large m (docs/schedules.md; both tested exactly).
#include <deque>

#include "loom/schedule/generators.h"

namespace loom::schedule::detail {

Schedule gen_dualpipev(const Shape& shape) {
  Schedule s = empty_schedule("dualpipev", shape);
  const int p = shape.pp;
  const int m = shape.microbatches;
  for (int r = 0; r < p; ++r) {
    const int chunk[2] = {r, 2 * p - 1 - r};
    int nf[2] = {0, 0}, nb[2] = {0, 0};
    std::deque<Action> pending_w;
    std::vector<Action>& list = s.ranks[r];
    auto forward = [&](int c) { list.push_back({chunk[c], Kind::F, nf[c]++}); };
    auto backward = [&](int c, bool split) {
      const int j = nb[c]++;
      if (!split) {
        list.push_back({chunk[c], Kind::B, j});
        return;
      }
      list.push_back({chunk[c], Kind::I, j});
      pending_w.push_back({chunk[c], Kind::W, j});
    };
    auto weight = [&] {
      list.push_back(pending_w.front());
      pending_w.pop_front();
    };
    for (int k = 0; k < 2 * (p - r - 1); ++k) forward(0);
    for (int k = 0; k < r + 1; ++k) {
      forward(0);
      forward(1);
    }
    for (int k = 0; k < p - r - 1; ++k) {
      backward(1, true);
      weight();
      forward(1);
    }
    for (int k = 0; k < m - 2 * p + r + 1; ++k) {
      forward(0);
      backward(1, false);
      forward(1);
      backward(0, false);
    }
    for (int k = 0; k < p - r - 1; ++k) {
      backward(1, false);
      forward(1);
      backward(0, false);
    }
    bool split = false;
    for (int k = 0; k < r + 1; ++k) {
      if (k == (r + 1) / 2 && r % 2 == 1) split = true;
      backward(1, split);
      if (k == (r + 1) / 2 && r % 2 == 0) split = true;
      backward(0, split);
    }
    for (int k = 0; k < p - r - 1; ++k) {
      weight();
      backward(0, true);
    }
    while (!pending_w.empty()) weight();
  }
  return s;
}

}  // namespace loom::schedule::detail
