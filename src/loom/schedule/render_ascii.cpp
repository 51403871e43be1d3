// Time-aligned text picture: one column per time unit (F, I, W one column, B two).
#include <cmath>
#include <cstdio>

#include "loom/schedule/io.h"
#include "loom/schedule/timing.h"

namespace loom::schedule {

std::string render_ascii(const Schedule& s) {
  const Timing timing = time_schedule(s);  // unit costs: communication is ignored
  const int columns = static_cast<int>(std::lround(timing.makespan));
  size_t width = 1;
  for (const auto& row : timing.ranks)
    for (const TimedAction& t : row) width = std::max(width, to_string(t.action).size());

  char bubble[32];
  std::snprintf(bubble, sizeof bubble, "%.1f%%", 100.0 * timing.bubble_fraction());
  std::string out = s.name + " pp=" + std::to_string(s.shape.pp) +
                    " loops=" + std::to_string(s.shape.loops) +
                    " microbatches=" + std::to_string(s.shape.microbatches) +
                    (s.shape.placement == Placement::V ? " placement=v" : "") + ": makespan " +
                    std::to_string(columns) + ", bubble " + bubble + "\n";
  const size_t label = ("rank " + std::to_string(timing.ranks.size() - 1)).size();
  for (size_t r = 0; r < timing.ranks.size(); ++r) {
    std::string line = "rank " + std::to_string(r);
    line.resize(label, ' ');
    line += " |";
    int col = 0;
    auto idle_until = [&](int end) {
      for (; col < end; ++col) {
        line += " .";
        line.append(width - 1, ' ');
      }
    };
    for (const TimedAction& t : timing.ranks[r]) {
      const int start = static_cast<int>(std::lround(t.start));
      const int end = static_cast<int>(std::lround(t.end));
      idle_until(start);
      if (end == start) continue;  // zero-cost actions have no column
      // The label, then '-' across the action's remaining columns.
      std::string cell = to_string(t.action);
      cell.resize((end - start) * (width + 1) - 1, '-');
      line += " " + cell;
      col = end;
    }
    idle_until(columns);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace loom::schedule
