#pragma once
// Whether the ranks of a run on several hosts see one folder under one path. On node-local
// disks each host has a folder of its own: the checkpointer then writes the manifests on every
// host and carries rank files between hosts (host_copies.h). These collectives find out which
// ranks share, and say so once when the run starts.
#include <string>
#include <vector>

#include "loom/comm/backend.h"

namespace loom::train {

// The ranks of `world` for which `flag` is true (each rank passes its own). Collective.
std::vector<int> ranks_where(comm::Backend& world, bool flag);

// The ranks that do not see a file rank 0 writes into `dir` (empty: every rank does; also on
// a single host, where nothing is asked). Collective.
std::vector<int> ranks_not_sharing(comm::Backend& world, const std::string& dir);

// At the start of a run on several hosts: rank 0 says, in one line, when some ranks do not
// share the run folder. Returns those ranks (ranks_not_sharing). Collective.
std::vector<int> say_if_not_shared(comm::Backend& world, const std::string& dir);

// By world rank, the lowest world rank on the same host (every rank 0 when the hosts are not
// known: one host).
std::vector<int> host_groups(int world);
// By world rank, the lowest rank of the ranks that see the same run folder: 0 for those that
// see rank 0's (all but `blind`), else the lowest rank of the same host.
std::vector<int> folder_groups(int world, const std::vector<int>& blind);

}  // namespace loom::train
