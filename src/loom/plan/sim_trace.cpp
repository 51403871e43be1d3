// Chrome trace of a simulated step (chrome://tracing, Perfetto), in the layout of the measured
// trace the trainer writes, so that prediction and measurement open side by side.
#include <cmath>

#include "loom/plan/simulator.h"

namespace loom::plan {
namespace {

std::string us(double seconds) { return std::to_string(std::llround(seconds * 1e6)); }

}  // namespace

std::string sim_trace_json(const SimResult& r) {
  static const char* kThreads[] = {"compute", "send", "dp"};
  std::string out = "{\"traceEvents\":[\n";
  bool first = true;
  auto add = [&](const std::string& e) {
    out += (first ? "" : ",\n") + e;
    first = false;
  };
  for (size_t p = 0; p < r.ranks.size(); ++p) {
    const std::string pid = std::to_string(p);
    add("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + pid +
        ",\"args\":{\"name\":\"simulated " + r.schedule_name + " rank " + pid + "\"}}");
    for (int t = 0; t < 3; ++t)
      add("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + pid + ",\"tid\":" +
          std::to_string(t) + ",\"args\":{\"name\":\"" + kThreads[t] + "\"}}");
    for (const SimEvent& e : r.ranks[p].events)
      add("{\"name\":\"" + e.name + "\",\"cat\":\"" + e.cat + "\",\"ph\":\"X\",\"ts\":" +
          us(e.start) + ",\"dur\":" + us(e.end - e.start) + ",\"pid\":" + pid +
          ",\"tid\":" + std::to_string(static_cast<int>(e.stream)) + "}");
  }
  out += "\n]}\n";
  return out;
}

}  // namespace loom::plan
