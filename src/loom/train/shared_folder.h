#pragma once
// Whether the ranks of a run on several hosts see one folder under one path. On node-local
// disks each host has a folder of its own: the run trains and saves, each rank writing its
// own checkpoint file, but the manifests (rank 0's) sit on the first host only, so a resume
// from there fails on the others. These collectives let the run say so, once, when it starts
// and when it resumes.
#include <string>
#include <vector>

#include "loom/comm/backend.h"

namespace loom::train {

// The ranks of `world` for which `flag` is true (each rank passes its own). Collective.
std::vector<int> ranks_where(comm::Backend& world, bool flag);

// The ranks that do not see a file rank 0 writes into `dir` (empty: every rank does; also on
// a single host, where nothing is asked). Collective.
std::vector<int> ranks_not_sharing(comm::Backend& world, const std::string& dir);

// At the start of a run on several hosts: rank 0 warns, in one line, when some ranks do not
// share the run folder. Collective.
void warn_if_not_shared(comm::Backend& world, const std::string& dir);

}  // namespace loom::train
