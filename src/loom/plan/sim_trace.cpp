// Chrome trace of a simulated step (chrome://tracing, Perfetto), in the layout of the measured
// trace the trainer writes, so that prediction and measurement open side by side.
#include <cmath>

#include "loom/plan/simulator.h"
#include "loom/trace/chrome_trace.h"

namespace loom::plan {
namespace {

double us(double seconds) {
  return double(std::llround(seconds * 1e6));
}

}  // namespace

std::string sim_trace_json(const SimResult& r) {
  static const char* kThreads[] = {"compute", "send", "dp"};
  trace::ChromeTrace out;
  for (size_t p = 0; p < r.ranks.size(); ++p) {
    const int pid = static_cast<int>(p);
    out.process_name(pid, "simulated " + r.schedule_name + " rank " + std::to_string(p));
    for (int t = 0; t < 3; ++t) out.thread_name(pid, t, kThreads[t]);
    for (const SimEvent& e : r.ranks[p].events)
      out.complete({e.name, e.cat, us(e.start), us(e.end - e.start)}, pid,
                   static_cast<int>(e.stream));
  }
  return out.json();
}

}  // namespace loom::plan
