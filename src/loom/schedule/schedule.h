#pragma once
// A schedule is data: one ordered action list per pipeline rank. Pipeline of passes:
//   generate (compute only) -> validate -> lower (communication + data-parallel actions)
//   -> simulate (plan/) or execute (parallel/).
// There are pp * loops stages; the placement says which rank holds which:
//   looping  stage s on rank s % pp (rank r: r, r+pp, r+2pp, ...);
//   v        the chunks of pp stages zigzag: even chunks go down the ranks, odd ones come back
//            up, so with loops = 2 rank r holds stages r and 2pp-1-r (zbv): stages pp-1 and
//            pp meet on the last rank, and the first and last stage are both on rank 0.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "loom/schedule/action.h"

namespace loom::schedule {

enum class Placement { Looping, V };

std::string_view placement_name(Placement p);                // "looping", "v"
std::optional<Placement> parse_placement(std::string_view);  // inverse of placement_name

struct Shape {
  int pp = 1;            // pipeline ranks
  int loops = 1;         // stages per pipeline rank (v)
  int microbatches = 1;  // m
  Placement placement = Placement::Looping;
  int stages() const { return pp * loops; }
  int rank_of(int stage) const {
    const int chunk = stage / pp, pos = stage % pp;
    return placement == Placement::V && chunk % 2 == 1 ? pp - 1 - pos : pos;
  }
  // The stages rank r holds, ascending.
  std::vector<int> stages_of(int rank) const {
    std::vector<int> out;
    for (int s = 0; s < stages(); ++s)
      if (rank_of(s) == rank) out.push_back(s);
    return out;
  }
};

struct Schedule {
  std::string name;  // generator name, or "custom" for imported ones
  Shape shape;
  std::vector<std::vector<Action>> ranks;  // ranks[r] = ordered actions of pipeline rank r
};

}  // namespace loom::schedule
