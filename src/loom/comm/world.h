#pragma once
// Process-wide communication lifetime and the dp x pp x tp mesh.
// Rank layout (config::RankOrder, parallel.placement): by default r = (pp_rank * dp + dp_rank)
// * tp + tp_rank, so a tensor-parallel group is a run of consecutive ranks (inside a node),
// then a data-parallel group, and a pipeline is a strided set; pipeline-inside swaps dp and pp
// (docs/architecture.md).
#include <memory>
#include <optional>
#include <string>

#include "loom/comm/backend.h"
#include "loom/config/config.h"

namespace loom::comm {

// True when this process was started by mpirun/mpiexec/srun (env of Open MPI, PMI, PMIx, Slurm).
bool launched_by_mpi();
// True when RANK and WORLD_SIZE are set (torchrun, `loom launch`, `loom train --nproc`).
bool launched_by_env();

// The backend a rank uses when the user chose none: LOOM_COMM if set (launchers pass it),
// mpi under mpirun, gloo under a torchrun-style launcher, mpi (one rank) otherwise.
BackendKind launch_backend();

// Brings up the world communicator of `kind`: MPI (thread-multiple) with its progress engine,
// or a c10d process group that meets through the store named by MASTER_ADDR/MASTER_PORT (under
// mpirun, rank 0 hosts the store and MPI tells the others where). Sets the log rank.
// Once per process; finalize() undoes it.
void init(BackendKind kind, int* argc, char*** argv);
void finalize();
bool initialized();
// Brings every rank down (after printing the caller's message): MPI_Abort on the world under
// MPI; elsewhere this process exits and its launcher stops the others.
[[noreturn]] void abort_all(int code);
// Ends a process that is not part of a job of several ranks (never initialized, or a world of
// one) with `code`, quietly.
[[noreturn]] void exit_alone(int code);
// Ends every rank with `code`, all of them calling it (an AgreedError): they meet (so that what
// one of them printed comes before any rank ends), finalize and exit. Should they not meet
// within the communication timeout, abort_all.
[[noreturn]] void exit_together(int code);

Backend& world();

// The MPI library's version line ("Open MPI v4.1.4, ..."), without initializing MPI.
std::string mpi_library_version();

struct Mesh {
  int dp = 1;
  int pp = 1;
  int tp = 1;
  int rank = 0;
  int dp_rank = 0;
  int pp_rank = 0;
  int tp_rank = 0;
  config::RankOrder order = config::RankOrder::DpInside;
  std::unique_ptr<Backend> dp_comm;  // same pipeline rank and tp rank (size dp)
  std::unique_ptr<Backend> pp_comm;  // same replica and tp rank (size pp)
  std::unique_ptr<Backend> tp_comm;  // same pipeline rank and replica (size tp)
  // World rank of (pp_rank, dp_rank, tp_rank).
  int world_rank(int pp_rank_, int dp_rank_, int tp_rank_ = 0) const {
    return config::mesh_rank(order, dp, pp, tp, pp_rank_, dp_rank_, tp_rank_);
  }
};

// Builds the mesh; throws UsageError when dp * pp * tp != world size.
Mesh make_mesh(Backend& base, int dp, int pp, int tp = 1,
               config::RankOrder order = config::RankOrder::DpInside);
inline Mesh make_mesh(int dp, int pp, int tp = 1) {
  return make_mesh(world(), dp, pp, tp);
}

}  // namespace loom::comm
