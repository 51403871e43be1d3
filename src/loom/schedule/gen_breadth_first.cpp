// gpipe and bfs: every local stage runs all its forwards, then all its backwards in reverse
// stage order. With loops == 1 the two are the same schedule.
#include "loom/schedule/generators.h"

namespace loom::schedule::detail {
namespace {

Schedule breadth_first(const std::string& name, const Shape& shape) {
  Schedule s = empty_schedule(name, shape);
  const int m = shape.microbatches;
  for (int r = 0; r < shape.pp; ++r) {
    std::vector<Action>& list = s.ranks[r];
    for (int c = 0; c < shape.loops; ++c)
      for (int j = 0; j < m; ++j) list.push_back({c * shape.pp + r, Kind::F, j});
    for (int c = shape.loops - 1; c >= 0; --c)
      for (int j = 0; j < m; ++j) list.push_back({c * shape.pp + r, Kind::B, j});
  }
  return s;
}

}  // namespace

Schedule gen_gpipe(const Shape& shape) {
  return breadth_first("gpipe", shape);
}
Schedule gen_bfs(const Shape& shape) {
  return breadth_first("bfs", shape);
}

}  // namespace loom::schedule::detail
