#pragma once
// Validation of compute-only or lowered schedules:
//  - every action's stage is owned by the rank that runs it (shape.rank_of: the placement);
//  - every (stage, micro-batch) has exactly one F and exactly one B (or one I and one W);
//  - dependencies: F(s,j) after F(s-1,j); B/I(s,j) after F(s,j) and after B/I(s+1,j);
//    W(s,j) after I(s,j); for lowered schedules RECV before the compute that needs it;
//  - a step-by-step simulation where each rank executes its list in order, compute actions wait
//    for their cross-rank dependencies (compute-only schedules) or RECV waits for the matching
//    SEND (lowered schedules; sends never block); no progress with work left = deadlock.
// Lowered schedules (those with any SEND/RECV) must have exactly the SEND/RECV pairs of every
// boundary between ranks. REDUCE_GRAD is optional, but then once per stage, after all of the
// stage's B/W. A stage with UNSHARD/RESHARD actions must be gathered when it computes, the two
// must alternate, and the stage ends the list resharded.
// On failure the report holds a rank x step grid with the offending action marked like [2B0].
#include <string>

#include "loom/schedule/schedule.h"

namespace loom::schedule {

struct ValidationResult {
  bool ok = true;
  std::string message;  // first problem found, one line
  std::string grid;     // rank x step grid with the offending action marked
};

ValidationResult check(const Schedule& s);
// Throws loom::UsageError with message + "\n" + grid when check() fails.
void validate(const Schedule& s);

}  // namespace loom::schedule
