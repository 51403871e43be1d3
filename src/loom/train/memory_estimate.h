#pragma once
// Memory per rank before any rank starts: the planner's memory model (parameters, gradients,
// optimizer state, activations in flight under the schedule; docs/planner.md) applied to the
// run's configuration, so that a model that cannot fit is refused in one line instead of
// swapping the machine to a halt.
#include "loom/config/config.h"
#include "loom/train/preflight.h"

namespace loom::train {

// Estimated memory of the largest rank (GPT and Llama models; zeros for the others, which are
// small, and for a GPT head with a bias): its peak, and with output.async_save the copy of its
// state an async save holds in host memory while the next steps train.
struct RankMemory {
  double peak = 0;
  double save_copy = 0;
};
RankMemory estimate_rank_memory(const config::Config& cfg, const Resolved& r);

// UsageError (one line) when `nproc` ranks of this configuration (all on this machine) are
// estimated to need more than it has available (MemAvailable in /proc/meminfo; each process's
// libraries count too), or, with train.device = cuda, more than a GPU's memory for the ranks it
// holds (the host then holds only the libraries).
void check_memory(const config::Config& cfg, const Resolved& r, int nproc);

}  // namespace loom::train
