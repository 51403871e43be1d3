#pragma once
// A stage's checkpoint state as layout-independent chunks (state_chunks.h): its parameters as
// the mode's optimized tensors hold them ("param/<name>": whole tensors, or the pieces of a
// ZeRO shard), the optimizer's state over the same pieces ("adamw.exp_avg/<name>", ...,
// "optimizer.step") and the mode's own state. Loading asks for exactly the pieces this
// rank's stage and shard hold, whatever layout wrote them.
#include "loom/parallel/data_parallel.h"
#include "loom/parallel/optimizer.h"
#include "loom/parallel/state_chunks.h"

namespace loom::parallel {

void save_stage_state(DataParallel& mode, const StageOptimizer& opt, ChunkWriter& w);
// UsageError (one line) when the checkpoint lacks something this stage needs.
void load_stage_state(DataParallel& mode, StageOptimizer& opt, const ChunkReader& r);

}  // namespace loom::parallel
