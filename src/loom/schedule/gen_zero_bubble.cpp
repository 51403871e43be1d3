// zb-h1: 1F1B with the backward split into I (input gradient, on the critical path) and W
// (weight gradient, free to move). Built by a unit-time list scheduler (F = I = W = 1):
// at each step a rank runs, by priority, its next I, else its next F if the rank stays within
// the 1F1B activation limit (min(pp - rank, m) micro-batches between F and W), else its
// oldest pending W. The W's thus fill the cool-down bubbles, and in steady state a W runs
// before the F that would exceed the limit. The order is kept; any real timing is valid.
#include <algorithm>

#include "loom/common/error.h"
#include "loom/schedule/generators.h"

namespace loom::schedule::detail {

Schedule gen_zb_h1(const Shape& shape) {
  Schedule s = empty_schedule("zb-h1", shape);
  const int p = shape.pp;
  const int m = shape.microbatches;
  // Step at which F(r, j) / I(r, j) ran; -1 while not yet run.
  std::vector<std::vector<int>> f_step(p, std::vector<int>(m, -1));
  std::vector<std::vector<int>> i_step(p, std::vector<int>(m, -1));
  std::vector<int> nf(p, 0), ni(p, 0), nw(p, 0);
  enum Pick { kIdle, kF, kI, kW };
  std::vector<int> pick(p);
  int remaining = 3 * p * m;
  for (int t = 0; remaining > 0; ++t) {
    LOOM_CHECK_LE(t, 6 * p * m + 2 * p, "zb-h1 list scheduler made no progress");
    for (int r = 0; r < p; ++r) {
      pick[r] = kIdle;
      auto before = [t](int step) { return step >= 0 && step < t; };
      const int limit = std::min(p - r, m);
      if (ni[r] < nf[r] && (r == p - 1 || before(i_step[r + 1][ni[r]])))
        pick[r] = kI;
      else if (nf[r] < m && (r == 0 || before(f_step[r - 1][nf[r]])) && nf[r] - nw[r] < limit)
        pick[r] = kF;
      else if (nw[r] < ni[r])
        pick[r] = kW;
    }
    for (int r = 0; r < p; ++r) {
      switch (pick[r]) {
        case kF:
          f_step[r][nf[r]] = t;
          s.ranks[r].push_back({r, Kind::F, nf[r]++});
          break;
        case kI:
          i_step[r][ni[r]] = t;
          s.ranks[r].push_back({r, Kind::I, ni[r]++});
          break;
        case kW: s.ranks[r].push_back({r, Kind::W, nw[r]++}); break;
        default: continue;
      }
      --remaining;
    }
  }
  return s;
}

}  // namespace loom::schedule::detail
