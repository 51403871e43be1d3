#pragma once
// Ideal timing of a compute-only schedule: each rank runs its actions in order, an action starts
// when the rank is free and its dependencies (same as validate.h) have finished; communication
// is free. Used for the ASCII/SVG pictures and to count the bubble against the closed forms
// of docs/schedules.md.
#include <vector>

#include "loom/schedule/schedule.h"

namespace loom::schedule {

struct UnitCosts {
  double f = 1.0;
  double b = 2.0;  // full backward
  double i = 1.0;  // input-gradient half of B
  double w = 1.0;  // weight-gradient half of B
};

struct TimedAction {
  Action action;
  double start = 0;
  double end = 0;
};

struct Timing {
  std::vector<std::vector<TimedAction>> ranks;  // compute actions only, in list order
  double makespan = 0;
  // Bubble fraction: idle / (idle + busy), summed over ranks, over [0, makespan].
  double bubble_fraction() const;
  double busy(int rank) const;
};

// Throws loom::UsageError if the schedule cannot finish (deadlock / missing dependency).
Timing time_schedule(const Schedule& s, const UnitCosts& costs = {});

// Peak activations per rank, in stage-loads: the most (stage, micro-batch) pairs whose F has run
// and whose backward has not yet released them (B, or W when split), over the rank's list.
std::vector<int> peak_activations(const Schedule& s);

}  // namespace loom::schedule
