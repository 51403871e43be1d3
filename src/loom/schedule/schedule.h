#pragma once
// A schedule is data: one ordered action list per pipeline rank. Pipeline of passes:
//   generate (compute only) -> validate -> lower (communication + data-parallel actions)
//   -> simulate (plan/) or execute (parallel/).
// Placement is looping: stage s lives on pipeline rank s % pp; there are pp * loops stages.
#include <string>
#include <vector>

#include "loom/schedule/action.h"

namespace loom::schedule {

struct Shape {
  int pp = 1;            // pipeline ranks
  int loops = 1;         // stages per pipeline rank (v)
  int microbatches = 1;  // m
  int stages() const { return pp * loops; }
  int rank_of(int stage) const { return stage % pp; }
};

struct Schedule {
  std::string name;  // generator name, or "custom" for imported ones
  Shape shape;
  std::vector<std::vector<Action>> ranks;  // ranks[r] = ordered actions of pipeline rank r
};

}  // namespace loom::schedule
