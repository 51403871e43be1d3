#pragma once
// Lowering inserts communication and data-parallel actions into a compute-only schedule.
//  - RECV_F(s,j) right before F(s,j) and SEND_F(s,j) right after it, when stage s-1 / s+1 is
//    on another rank (adjacent stages on the same rank pass tensors locally: no action);
//  - RECV_B(s,j) before B(s,j) or I(s,j), SEND_B(s,j) right after it, likewise;
//  - REDUCE_GRAD(s) right after the stage's last backward action (B or W) of the step;
//  - for sharded parameters (DpMode::ZeroParams): UNSHARD(s) before the stage's first use,
//    moved earlier to prefetch (at most `max_unsharded` stages gathered at once on a rank),
//    RESHARD(s) after its last forward when reshard_after_forward (then UNSHARD again before its
//    first backward), and RESHARD(s) after its last backward. Depth-first schedules that leave
//    a stage and come back re-gather it each time it is used again when reshard_after_forward.
#include "loom/schedule/schedule.h"

namespace loom::schedule {

enum class DpMode {
  None,          // no data-parallel actions (dp == 1)
  Reduce,        // REDUCE_GRAD only (allreduce, zero1, zero2, slim, quant)
  ZeroParams,    // UNSHARD / RESHARD / REDUCE_GRAD (zero3)
};

struct LowerOptions {
  DpMode dp_mode = DpMode::Reduce;
  bool reshard_after_forward = true;  // zero3 only
  int max_unsharded = 2;              // zero3 only: stages gathered at once per rank
};

Schedule lower(const Schedule& compute_only, const LowerOptions& opts = {});

}  // namespace loom::schedule
