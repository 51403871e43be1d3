#pragma once
// Internal to loom_profile: the CPU a run spends beyond its compute.
//
// Besides F, B, I and W a rank's process runs its communication engine (polling posted
// requests, copying messages in), the optimizer step and the step's bookkeeping. With a core
// per rank that mostly fills time the rank waits anyway; when ranks outnumber the cores it is
// taken from the others' compute. A run reports both per step (metrics.jsonl: world_cpu_s,
// world_compute_cpu_s); their ratio is the cluster's `runtime_cpu`. On a 2-core VM it was
// 1.09-1.17 whatever the schedule (docs/notes/planner-validation.md, 2026-12-06).
#include <cstdint>
#include <string>

namespace loom::profile {

// Steps of the short run below; its median is over those after the fourth (warm-up).
constexpr int kShortRunSteps = 12;

// Runs `<this executable> train` on two ranks of this machine for kShortRunSteps steps (the model
// of `config`, a 2-stage 1F1B pipeline, or 2 data-parallel replicas of a one-layer model) in a
// temporary folder and returns the median over its steps after the first four of world CPU
// over world compute CPU (>= 1). On failure returns 0 and says why in *why.
double runtime_cpu_of_a_run(const std::string& config, int64_t layers, std::string* why);

}  // namespace loom::profile
