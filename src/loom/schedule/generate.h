#pragma once
// Schedule generators (compute actions only: F, B, or F, I, W).
//   gpipe        all F then all B, per stage; any (pp, loops, m).
//   1f1b         PipeDream-Flush; loops must be 1.
//   interleaved  Megatron depth-first looping 1F1B; loops >= 1, m % pp == 0 when loops > 1.
//   bfs          breadth-first looping (Lamy-Poirier 2023); any (pp, loops, m).
//   zb-h1        zero bubble with I/W split, peak activations <= 1F1B; loops must be 1.
//   zbv          V-shaped zero bubble (ZB-V): I/W split, V placement; loops must be 2.
//   dualpipev    DualPipeV: V placement, F and B of the two chunks paired in the steady state,
//                I/W split in warm-up and cool-down; loops must be 2, microbatches >= 2 pp.
#include <string>
#include <vector>

#include "loom/schedule/schedule.h"

namespace loom::schedule {

std::vector<std::string> generator_names();
// The placement a generator's stages take: V for zbv and dualpipev, looping for the others
// (and unknown names). generate() sets it in the schedule's shape whatever the shape passed in
// says.
Placement placement_of(const std::string& name);
// Empty string when supported, else a one-line reason with the fix.
std::string unsupported_reason(const std::string& name, const Shape& shape);
// Throws loom::UsageError for an unknown name or an unsupported shape.
Schedule generate(const std::string& name, const Shape& shape);

}  // namespace loom::schedule
