#pragma once
// Internal to schedule/: one function per generator; shapes are checked by generate().
#include "loom/schedule/schedule.h"

namespace loom::schedule::detail {

Schedule gen_gpipe(const Shape& shape);
Schedule gen_bfs(const Shape& shape);
Schedule gen_1f1b(const Shape& shape);
Schedule gen_interleaved(const Shape& shape);
Schedule gen_zb_h1(const Shape& shape);
Schedule gen_zbv(const Shape& shape);
Schedule gen_dualpipev(const Shape& shape);

// An empty schedule of the shape, named.
Schedule empty_schedule(const std::string& name, const Shape& shape);

}  // namespace loom::schedule::detail
