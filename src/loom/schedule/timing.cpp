#include "loom/schedule/timing.h"

#include <algorithm>

#include "loom/common/error.h"
#include "loom/schedule/deps.h"

namespace loom::schedule {

double Timing::busy(int rank) const {
  double sum = 0;
  for (const TimedAction& t : ranks.at(rank)) sum += t.end - t.start;
  return sum;
}

double Timing::bubble_fraction() const {
  if (ranks.empty() || makespan <= 0) return 0;
  double busy_sum = 0;
  for (size_t r = 0; r < ranks.size(); ++r) busy_sum += busy(static_cast<int>(r));
  return 1.0 - busy_sum / (static_cast<double>(ranks.size()) * makespan);
}

Timing time_schedule(const Schedule& s, const UnitCosts& costs) {
  const Shape& shape = s.shape;
  detail::check_shape(shape);
  if (static_cast<int>(s.ranks.size()) != shape.pp)
    LOOM_USAGE("cannot time schedule '", s.name, "': ", s.ranks.size(),
               " rank lists for pp=", shape.pp);
  if (costs.f < 0 || costs.b < 0 || costs.i < 0 || costs.w < 0)
    LOOM_USAGE("action costs must be >= 0");
  for (const auto& list : s.ranks)
    for (const Action& a : list)
      if (is_compute(a.kind) && (a.stage < 0 || a.stage >= shape.stages() || a.microbatch < 0 ||
                                 a.microbatch >= shape.microbatches))
        LOOM_USAGE("cannot time schedule '", s.name, "': action ", to_string(a),
                   " is outside stages 0..", shape.stages() - 1, " / micro-batches 0..",
                   shape.microbatches - 1);

  auto cost = [&](Kind k) {
    switch (k) {
      case Kind::F: return costs.f;
      case Kind::B: return costs.b;
      case Kind::I: return costs.i;
      default: return costs.w;
    }
  };

  detail::SlotTable<double> end(shape, -1.0);
  Timing timing;
  timing.ranks.resize(shape.pp);
  std::vector<size_t> next(shape.pp, 0);
  std::vector<double> free_at(shape.pp, 0.0);
  for (;;) {
    bool progress = false;
    bool finished = true;
    for (int r = 0; r < shape.pp; ++r) {
      const std::vector<Action>& list = s.ranks[r];
      for (; next[r] < list.size(); ++next[r]) {
        const Action& a = list[next[r]];
        if (!is_compute(a.kind)) continue;  // communication and DP actions take no time here
        detail::Dep deps[2];
        int n = detail::deps_of(shape, a, deps);
        double start = free_at[r];
        bool ready = true;
        for (int d = 0; d < n && ready; ++d) {
          double e = end.at(deps[d]);
          ready = e >= 0;
          start = std::max(start, e);
        }
        if (!ready) break;
        free_at[r] = start + cost(a.kind);
        detail::record(end, a, free_at[r]);
        timing.ranks[r].push_back({a, start, free_at[r]});
        progress = true;
      }
      finished = finished && next[r] == list.size();
    }
    if (finished) break;
    if (!progress) {
      std::string waits;
      for (int r = 0; r < shape.pp; ++r)
        if (next[r] < s.ranks[r].size())
          waits += loom::detail::concat(waits.empty() ? "" : ", ", "rank ", r, " at ",
                                        to_string(s.ranks[r][next[r]]));
      LOOM_USAGE("cannot time schedule '", s.name, "': deadlock or missing dependency (", waits,
                 "); run validate() for details");
    }
  }
  for (double f : free_at) timing.makespan = std::max(timing.makespan, f);
  return timing;
}

std::vector<int> peak_activations(const Schedule& s) {
  std::vector<int> peaks;
  for (const auto& list : s.ranks) {
    int live = 0, peak = 0;
    for (const Action& a : list) {
      if (a.kind == Kind::F) peak = std::max(peak, ++live);
      if (a.kind == Kind::B || a.kind == Kind::W) --live;
    }
    peaks.push_back(peak);
  }
  return peaks;
}

}  // namespace loom::schedule
