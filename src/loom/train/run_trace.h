#pragma once
// The measured timeline of a run's last step: every rank's executor events, gathered to rank 0
// as packed bytes (trace/chrome_trace.h), written as a Chrome trace (one thread per rank) and
// as an SVG of the pipeline (the ranks of replica 0) drawn like the generated schedule.
#include <string>
#include <vector>

#include "loom/comm/backend.h"
#include "loom/schedule/schedule.h"
#include "loom/trace/chrome_trace.h"

namespace loom::train {

// Collective over world: every rank's events on rank 0 (indexed by rank), nothing elsewhere.
std::vector<std::vector<trace::Event>> gather_events(comm::Backend& world,
                                                     const std::vector<trace::Event>& mine);

// path: the .json; the .svg goes next to it. World rank q is (pp rank q / dp, replica q % dp).
void write_run_trace(const std::string& path, const std::vector<std::vector<trace::Event>>& ranks,
                     const schedule::Schedule& lowered, int dp, const std::string& schedule_name);

}  // namespace loom::train
