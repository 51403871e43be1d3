#pragma once
// The shapes that cross stage boundaries, found as PyTorch's PipelineStage finds them: each
// stage runs its own blocks on its input spec to get its output spec, and the spec travels
// down the pipeline in stage order (to the next stage's rank over the pipeline communicator,
// or locally when one rank holds both; which rank holds a stage is the placement's,
// Shape::rank_of).
#include <map>
#include <vector>

#include "loom/comm/backend.h"
#include "loom/parallel/stage.h"
#include "loom/schedule/schedule.h"

namespace loom::parallel {

// Every pipeline rank calls it with its own stages (collective over pp_comm). Returns specs
// indexed by stage (size stages + 1: the last is the model's output): entries s and s + 1 are
// filled for each stage s this rank holds, the others stay empty.
std::vector<ActivationSpec> infer_boundaries(const std::map<int, Stage*>& stages,
                                             const schedule::Shape& shape, int pp_rank,
                                             comm::Backend& pp_comm,
                                             const ActivationSpec& model_input);

}  // namespace loom::parallel
