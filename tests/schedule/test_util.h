#pragma once
// Helpers shared by the schedule tests.
#include <ostream>
#include <string>
#include <vector>

#include "loom/schedule/generate.h"
#include "loom/schedule/schedule.h"

namespace loom::schedule {

// GoogleTest prints actions as "2F0".
inline void PrintTo(const Action& a, std::ostream* os) {
  *os << to_string(a);
}

}  // namespace loom::schedule

namespace loom::schedule::test_util {

// The shapes the sweeps cover: pp 1..8, loops 1..4, micro-batches 1..16.
inline std::vector<Shape> sweep_shapes() {
  std::vector<Shape> shapes;
  for (int pp = 1; pp <= 8; ++pp)
    for (int loops = 1; loops <= 4; ++loops)
      for (int m = 1; m <= 16; ++m) shapes.push_back({pp, loops, m});
  return shapes;
}

inline std::string shape_str(const std::string& name, const Shape& s) {
  return name + " pp=" + std::to_string(s.pp) + " loops=" + std::to_string(s.loops) +
         " m=" + std::to_string(s.microbatches);
}

inline int count_kind(const Schedule& s, Kind k, int stage = -1) {
  int n = 0;
  for (const auto& list : s.ranks)
    for (const Action& a : list) n += a.kind == k && (stage < 0 || a.stage == stage);
  return n;
}

inline int count_compute(const Schedule& s) {
  int n = 0;
  for (const auto& list : s.ranks)
    for (const Action& a : list) n += is_compute(a.kind);
  return n;
}

inline Schedule strip_to_compute(const Schedule& s) {
  Schedule out = s;
  for (auto& list : out.ranks) {
    std::vector<Action> kept;
    for (const Action& a : list)
      if (is_compute(a.kind)) kept.push_back(a);
    list = kept;
  }
  return out;
}

// Counts occurrences of a substring.
inline int count_text(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace loom::schedule::test_util
