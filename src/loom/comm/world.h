#pragma once
// Process-wide MPI lifetime and the dp x pp mesh.
// Rank layout (DESIGN.md §1): r = pp_rank * dp + dp_rank, so a data-parallel group is a run of
// consecutive ranks and a pipeline is a strided set.
#include <memory>

#include "loom/comm/communicator.h"

namespace loom::comm {

// True when this process was started by mpirun/mpiexec/srun (env of Open MPI, PMI, PMIx, Slurm).
bool launched_by_mpi();

// Initializes MPI (thread-multiple), starts the progress engine, sets the log rank.
// Safe to call once per process; finalize() undoes it.
void init(int* argc, char*** argv);
void finalize();
// Brings every rank down (after printing the caller's message): MPI_Abort on the world.
[[noreturn]] void abort_all(int code);

Communicator& world();

struct Mesh {
  int dp = 1;
  int pp = 1;
  int rank = 0;
  int dp_rank = 0;
  int pp_rank = 0;
  std::unique_ptr<Communicator> dp_comm;  // ranks of the same pipeline rank (size dp)
  std::unique_ptr<Communicator> pp_comm;  // ranks of the same replica (size pp)
  // World rank of (pp_rank, dp_rank).
  int world_rank(int pp_rank_, int dp_rank_) const { return pp_rank_ * dp + dp_rank_; }
};

// Builds the mesh; throws UsageError when dp * pp != world size.
Mesh make_mesh(Communicator& base, int dp, int pp);
inline Mesh make_mesh(int dp, int pp) { return make_mesh(world(), dp, pp); }

}  // namespace loom::comm
