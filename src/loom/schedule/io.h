#pragma once
// Import/export and pictures of schedules.
// CSV: one line per pipeline rank, actions separated by commas, e.g. "0F0,0F1,0B0,0B1".
// A header line "# pp=2 loops=1 microbatches=4 name=custom" gives the shape, with
// "placement=v" for V placement (looping when absent); without it the shape is inferred
// (pp = lines, stages = max stage + 1, m = max micro-batch + 1, placement looping unless the
// actions fit V placement only).
#include <string>

#include "loom/schedule/schedule.h"
#include "loom/schedule/timing.h"

namespace loom::schedule {

std::string to_csv(const Schedule& s);
Schedule from_csv(const std::string& text);  // throws loom::UsageError on bad text
Schedule load_csv(const std::string& path);  // throws loom::UsageError when unreadable

std::string render_ascii(const Schedule& s);  // rank x step grid, compute actions aligned
std::string render_svg(const Schedule& s);    // one row per rank, colour per kind
// Same picture for a given timing (e.g. one measured by the runtime; unit_label like " ms").
std::string render_svg(const Schedule& s, const Timing& timing, const std::string& unit_label);
// Chrome trace JSON (chrome://tracing, Perfetto); unit-time actions, one track per rank.
std::string render_trace(const Schedule& s);

}  // namespace loom::schedule
