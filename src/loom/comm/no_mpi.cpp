// The MPI seam (mpi_world.h) of a build without MPI (cmake -DLOOM_WITH_MPI=OFF): ranks meet
// through c10d (Gloo, NCCL) under `loom train --nproc N`, `loom launch` or torchrun.
#include "loom/comm/mpi_world.h"
#include "loom/common/error.h"

namespace loom::comm::mpi {

bool available() {
  return false;
}

void init(int*, char***) {
  LOOM_USAGE("this loom was built without MPI (LOOM_WITH_MPI=OFF): start the ranks with `loom ",
             "train --nproc N` (or torchrun) and --comm gloo or nccl");
}

std::unique_ptr<Backend> make_world() {
  init(nullptr, nullptr);
  return nullptr;
}

Rendezvous rendezvous(std::unique_ptr<StoreServer>*) {
  init(nullptr, nullptr);
  return {};
}

void stop_engine() {}
void finalize() {}
void abort_world(int) {}

std::string library_version() {
  return "none (built without MPI)";
}

}  // namespace loom::comm::mpi
