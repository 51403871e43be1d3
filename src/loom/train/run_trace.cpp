#include "loom/train/run_trace.h"

#include <algorithm>
#include <filesystem>

#include "loom/common/files.h"
#include "loom/schedule/io.h"
#include "loom/schedule/timing.h"
#include "loom/train/checkpoint.h"

namespace loom::train {
namespace {

constexpr int kTraceTag = 4242;

}  // namespace

std::vector<std::vector<trace::Event>> gather_events(comm::Backend& world,
                                                     const std::vector<trace::Event>& mine) {
  const std::string bytes = trace::pack(mine);
  int64_t len = static_cast<int64_t>(bytes.size());
  std::vector<int64_t> lens(world.size());
  world.all_gather(&len, lens.data(), 1, comm::DType::Int64)->wait();
  if (world.rank() != 0) {
    if (len) world.send(bytes.data(), bytes.size(), comm::DType::UInt8, 0, kTraceTag)->wait();
    return {};
  }
  std::vector<std::vector<trace::Event>> out(world.size());
  out[0] = mine;
  for (int q = 1; q < world.size(); ++q) {
    std::string part(lens[q], '\0');
    if (lens[q]) world.recv(part.data(), part.size(), comm::DType::UInt8, q, kTraceTag)->wait();
    out[q] = trace::unpack(part);
  }
  return out;
}

void write_run_trace(const std::string& path, const std::vector<std::vector<trace::Event>>& ranks,
                     const schedule::Schedule& lowered, int dp, const std::string& schedule_name) {
  double t0 = 1e300;  // the earliest event of any rank is time 0
  for (const auto& events : ranks)
    for (const auto& e : events) t0 = std::min(t0, e.start_us);
  trace::ChromeTrace json;
  schedule::Timing timing;
  timing.ranks.resize(lowered.shape.pp);
  for (size_t q = 0; q < ranks.size(); ++q) {
    const int tid = static_cast<int>(q);
    json.thread_name(0, tid, "rank " + std::to_string(q));
    for (const trace::Event& e : ranks[q]) {
      json.complete({e.name, e.cat, e.start_us - t0, e.dur_us}, 0, tid);
      if (tid % dp != 0 || e.name.rfind("wait:", 0) == 0) continue;  // the SVG: replica 0's compute
      schedule::Action a = schedule::parse_action(e.name);
      if (!schedule::is_compute(a.kind)) continue;
      const double s_ms = (e.start_us - t0) / 1000.0, e_ms = s_ms + e.dur_us / 1000.0;
      timing.ranks[tid / dp].push_back({a, s_ms, e_ms});
      timing.makespan = std::max(timing.makespan, e_ms);
    }
  }
  write_file_atomic(path, json.json());
  schedule::Schedule shown = lowered;
  shown.name = "measured " + schedule_name;
  write_file_atomic(std::filesystem::path(path).replace_extension(".svg").string(),
                    schedule::render_svg(shown, timing, " ms"));
}

}  // namespace loom::train
