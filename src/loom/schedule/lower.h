#pragma once
// Lowering inserts communication and data-parallel actions into a compute-only schedule.
//  - RECV_F(s,j) right before F(s,j) and SEND_F(s,j) right after it, when stage s-1 / s+1 is
//    on another rank (adjacent stages on the same rank pass tensors locally: no action);
//  - RECV_B(s,j) before B(s,j) or I(s,j), SEND_B(s,j) right after it, likewise;
//  - REDUCE_GRAD(s) right after the stage's last backward action (B or W) of the step (after
//    that action's SEND_B, before any other compute);
//  - for sharded parameters (DpMode::ZeroParams): UNSHARD(s) before the stage's first use,
//    moved earlier to prefetch (at most `max_unsharded` stages gathered at once on a rank),
//    RESHARD(s) after its last forward when reshard_after_forward (then UNSHARD again before its
//    first backward), and RESHARD(s) after its last backward. Depth-first schedules that leave
//    a stage and come back re-gather it each time it is used again when reshard_after_forward.
// The sharding rule, precisely (per rank, over its compute list):
//  - without reshard_after_forward a stage is gathered once, from its first compute action to
//    its last: 1 UNSHARD and 1 RESHARD per stage and step;
//  - with reshard_after_forward a stage is gathered once per visit. A forward visit is a
//    maximal run of the stage's F's in the rank's sequence of forwards (the backwards of other
//    stages in between do not end it); a backward visit likewise over B/I/W. Visits of the same
//    stage that overlap share one gather. So breadth-first gathers each stage twice per step,
//    1F1B once, and Megatron's interleaved schedule about m/pp times per stage and phase (it
//    visits a stage once per group of pp micro-batches);
//  - RESHARD comes right after the gather's last compute action (after its SEND and
//    REDUCE_GRAD). UNSHARD is prefetched one gather ahead: gathers are placed in order of first
//    use, and each UNSHARD moves earlier past compute actions while fewer than max_unsharded
//    stages are gathered there, but not before the first compute action of the previous gather
//    (it overlaps the stage computing before it) nor before the stage's own previous RESHARD.
//    The budget limits prefetching only; stages that must be gathered at the same time are.
#include "loom/schedule/schedule.h"

namespace loom::schedule {

enum class DpMode {
  None,        // no data-parallel actions (dp == 1)
  Reduce,      // REDUCE_GRAD only (allreduce, zero1, zero2, slim, quant)
  ZeroParams,  // UNSHARD / RESHARD / REDUCE_GRAD (zero3)
};

struct LowerOptions {
  DpMode dp_mode = DpMode::Reduce;
  bool reshard_after_forward = true;  // zero3 only
  int max_unsharded = 2;              // zero3 only: stages gathered at once per rank
};

Schedule lower(const Schedule& compute_only, const LowerOptions& opts = {});

}  // namespace loom::schedule
