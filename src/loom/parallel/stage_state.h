#pragma once
// A stage's checkpoint state as layout-independent chunks (state_chunks.h): its parameters as
// the mode's optimized tensors hold them ("param/<name>": whole tensors, or the pieces of a
// ZeRO shard), the optimizer's state over the same pieces ("adamw.exp_avg/<name>", ...,
// "optimizer.step") and the mode's own state. Loading asks for exactly the pieces this
// rank's stage and shard hold, whatever layout wrote them.
// Modes whose replicas each train a model of their own (slim, diloco: per_replica()) save one
// copy per replica. A run with the same number of such replicas loads its own; any other run
// (another dp, or a mode with one model) loads their mean, parameters and optimizer state
// alike, as DiLoCo's replicas take at the end of a run.
#include "loom/parallel/data_parallel.h"
#include "loom/parallel/optimizer.h"
#include "loom/parallel/state_chunks.h"

namespace loom::parallel {

void save_stage_state(DataParallel& mode, const StageOptimizer& opt, ChunkWriter& w);
// `saved_replicas`: how many models the checkpoint holds per stage (the dp of a per-replica
// mode that wrote it), 0 for one. UsageError (one line) when the checkpoint lacks something
// this stage needs.
void load_stage_state(DataParallel& mode, StageOptimizer& opt, const ChunkReader& r,
                      int saved_replicas = 0);
// Tells `f` what load_stage_state() and the mode will ask for: the elements of the parameters
// and optimizer state this stage's shard holds (`shards`; false when the checkpoint's
// tensor-parallel parts must be joined whole first: then whole tensors), every other tensor of
// the stage's parameters whole.
void want_stage_state(const DataParallel& mode, const StageOptimizer& opt, ChunkFilter& f,
                      bool shards);

}  // namespace loom::parallel
