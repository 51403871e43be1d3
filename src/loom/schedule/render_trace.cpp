// Chrome trace (chrome://tracing, Perfetto): one complete event per compute action, one thread
// per pipeline rank. Unit costs from timing.h; one time unit is shown as 1 ms.
#include <cmath>

#include "loom/schedule/io.h"
#include "loom/schedule/timing.h"
#include "loom/trace/chrome_trace.h"

namespace loom::schedule {
namespace {

constexpr double kMicrosPerUnit = 1000.0;

double micros(double units) {
  return double(std::llround(units * kMicrosPerUnit));
}

}  // namespace

std::string render_trace(const Schedule& s) {
  const Timing timing = time_schedule(s);
  trace::ChromeTrace out;
  out.process_name(0, "schedule " + s.name);
  for (size_t r = 0; r < timing.ranks.size(); ++r)
    out.thread_name(0, static_cast<int>(r), "rank " + std::to_string(r));
  for (size_t r = 0; r < timing.ranks.size(); ++r)
    for (const TimedAction& t : timing.ranks[r]) {
      const Action& a = t.action;
      out.complete(
          {to_string(a), std::string(kind_name(a.kind)), micros(t.start), micros(t.end - t.start)},
          0, static_cast<int>(r), {{"stage", a.stage}, {"microbatch", a.microbatch}});
    }
  return out.json();
}

}  // namespace loom::schedule
