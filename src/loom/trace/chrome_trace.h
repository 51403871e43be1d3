#pragma once
// The one Chrome-trace writer (chrome://tracing, Perfetto) behind every timeline loom writes:
// the generated schedule (schedule/render_trace.cpp), the simulator's prediction
// (plan/sim_trace.cpp) and the measured run (train/run_trace.cpp). No libtorch, no MPI.
// Events can also be packed into bytes and back, so ranks can gather them as a plain buffer.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace loom::trace {

// One complete ("X") event; times in microseconds.
struct Event {
  std::string name;  // "2F0"
  std::string cat;   // "F"
  double start_us = 0;
  double dur_us = 0;
};

class ChromeTrace {
 public:
  void process_name(int pid, const std::string& name);
  void thread_name(int pid, int tid, const std::string& name);
  // Times print with one decimal, or as integers when they are whole. args: integer fields.
  void complete(const Event& e, int pid, int tid,
                const std::vector<std::pair<std::string, int64_t>>& args = {});
  // {"traceEvents":[ one event per line ]}
  std::string json() const;

 private:
  std::vector<std::string> lines_;
};

std::string json_string(const std::string& s);  // quoted and escaped

// Length-prefixed names and the two times, in host byte order (ranks of one job).
std::string pack(const std::vector<Event>& events);
std::vector<Event> unpack(const std::string& bytes);  // throws loom::Error when truncated

}  // namespace loom::trace
