#pragma once
// A tensor-parallel group of `size` ranks in which this process is rank 0 and nothing moves:
// its collectives complete at once (an all-reduce leaves the tensor as it is, a gather copies
// this rank's block into every block), so a tensor-parallel shard of a block computes exactly
// its own share of the work and none of the communication. loom profile times the shards this
// way; the simulator adds the collectives from the network model. Point-to-point is refused.
#include <memory>

#include "loom/comm/backend.h"

namespace loom::profile {

std::unique_ptr<comm::Backend> idle_group(int size);

}  // namespace loom::profile
