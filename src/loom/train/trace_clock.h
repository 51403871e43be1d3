#pragma once
// One time origin for every rank's timeline. Ranks on one machine read the same monotonic
// clock, so they take rank 0's origin and line up exactly; across machines the clocks are
// unrelated, and each rank starts its own as a barrier releases them (skew: the barrier's,
// more when ranks share cores).
#include <functional>

#include "loom/comm/backend.h"

namespace loom::train {

// Collective: true when every rank of `world` runs on this host (hashes of the host names).
bool on_one_machine(comm::Backend& world);

// Collective: the origin this rank's trace counts from, on the clock `now_us` reads (read as
// the barrier releases the ranks).
double shared_trace_origin(comm::Backend& world, const std::function<double()>& now_us);

}  // namespace loom::train
