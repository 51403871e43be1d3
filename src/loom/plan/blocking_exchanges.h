#pragma once
// Pipeline messages as Megatron-LM's 2021 code moves them (schedules.py and
// p2p_communication.py of that year): between two compute steps a rank issues ONE batched
// exchange (torch.distributed.batch_isend_irecv) holding the sends of the step just computed
// and the receives the next step needs, and waits for all of it. A step is one compute action,
// except in its interleaved schedule, where the steady state computes a forward and then a
// backward before exchanging: the forward's output leaves only after that backward.
//
// blocking_exchanges() moves the SEND/RECV actions of a lowered schedule to those places; each
// exchange is then a run of consecutive SEND/RECV actions between compute actions, which is
// what the simulator's blocking mode (SimOptions::blocking_p2p) treats as one batched wait.
// Other actions (UNSHARD, RESHARD, REDUCE_GRAD) stay right after the compute they followed.
#include "loom/schedule/schedule.h"

namespace loom::plan {

// pair_forward_backward: a forward immediately followed by a backward on the rank is one step
// (Megatron-LM's interleaved schedule); otherwise every compute action is a step (its 1F1B).
schedule::Schedule blocking_exchanges(const schedule::Schedule& lowered,
                                      bool pair_forward_backward);

}  // namespace loom::plan
