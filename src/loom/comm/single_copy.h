#pragma once
// Whether Open MPI's shared-memory transport can copy a message between two ranks of this
// machine in one step, straight from the sender's memory (CMA, process_vm_readv). Without it
// every message goes through shared buffers that both ranks must work on: 2-rank pipeline
// steps ran 8% (1F1B) and 32% (bfs) slower so here (docs/architecture.md, MPI engine).
#include <string>

namespace loom::comm {

// Why it cannot, naming the cause and the fix, or "" when it can.
std::string single_copy_problem();

// Whether messages between ranks of this machine go through shared memory with a single
// copy: the shared-memory transport not left out by OMPI_MCA_btl, and no problem above.
bool shared_memory_single_copy();

}  // namespace loom::comm
