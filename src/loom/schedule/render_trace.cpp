// Chrome trace (chrome://tracing, Perfetto): one complete event per compute action, one thread
// per pipeline rank. Unit costs from timing.h; one time unit is shown as 1 ms.
#include <cmath>

#include "loom/schedule/io.h"
#include "loom/schedule/timing.h"

namespace loom::schedule {
namespace {

constexpr double kMicrosPerUnit = 1000.0;

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string micros(double units) { return std::to_string(std::llround(units * kMicrosPerUnit)); }

}  // namespace

std::string render_trace(const Schedule& s) {
  const Timing timing = time_schedule(s);
  std::string out = "{\"traceEvents\":[\n";
  out += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{\"name\":" +
         json_string("schedule " + s.name) + "}}";
  for (size_t r = 0; r < timing.ranks.size(); ++r)
    out += ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":" + std::to_string(r) +
           ",\"args\":{\"name\":\"rank " + std::to_string(r) + "\"}}";
  for (size_t r = 0; r < timing.ranks.size(); ++r) {
    for (const TimedAction& t : timing.ranks[r]) {
      const Action& a = t.action;
      out += ",\n{\"name\":\"" + to_string(a) + "\",\"cat\":\"" + std::string(kind_name(a.kind)) +
             "\",\"ph\":\"X\",\"ts\":" + micros(t.start) + ",\"dur\":" + micros(t.end - t.start) +
             ",\"pid\":0,\"tid\":" + std::to_string(r) +
             ",\"args\":{\"stage\":" + std::to_string(a.stage) +
             ",\"microbatch\":" + std::to_string(a.microbatch) + "}}";
    }
  }
  out += "\n]}\n";
  return out;
}

}  // namespace loom::schedule
