#pragma once
// What world.cpp needs of MPI, behind one seam: mpi_world.cpp (Open MPI) or, in a build
// without MPI (cmake -DLOOM_WITH_MPI=OFF, e.g. a GPU machine without Open MPI), no_mpi.cpp,
// whose functions say how to launch without it. Only comm/ includes this header.
#include <memory>
#include <string>

#include "loom/comm/backend.h"
#include "loom/comm/c10d_backend.h"

namespace loom::comm::mpi {

bool available();  // this build has MPI
// MPI_Init_thread (thread-multiple), once; throws where there is no MPI.
void init(int* argc, char*** argv);
// The world as an MPI communicator, its progress engine started.
std::unique_ptr<Backend> make_world();
// Under mpirun with a c10d backend: rank 0 hosts the store (kept in *server), MPI tells the
// others where.
Rendezvous rendezvous(std::unique_ptr<StoreServer>* server);
void stop_engine();          // before the world is destroyed
void finalize();             // MPI_Finalize (if init() ran), after the world is gone
void abort_world(int code);  // MPI_Abort on the world, if MPI is up; returns otherwise
std::string library_version();

}  // namespace loom::comm::mpi
