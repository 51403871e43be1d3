#include "loom/comm/world.h"

#include <cstdlib>

#include "loom/comm/engine.h"
#include "loom/common/error.h"
#include "loom/common/log.h"

namespace loom::comm {
namespace {
std::unique_ptr<Communicator> g_world;
}

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

void init(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided < MPI_THREAD_MULTIPLE)
      throw Error("the MPI library does not provide MPI_THREAD_MULTIPLE; rebuild Open MPI with "
                  "thread support");
    // Errors come back as codes; loom turns them into exceptions and aborts cleanly.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  }
  g_world = std::make_unique<Communicator>(MPI_COMM_WORLD, "world", false);
  log::set_rank(g_world->rank());
  Engine::instance().start();
}

void finalize() {
  Engine::instance().stop();
  g_world.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void abort_all(int code) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

Communicator& world() {
  LOOM_CHECK(g_world != nullptr, "loom::comm::init() was not called");
  return *g_world;
}

Mesh make_mesh(Communicator& w, int dp, int pp) {
  if (dp < 1 || pp < 1 || dp * pp != w.size())
    LOOM_USAGE("dp (", dp, ") x pp (", pp, ") must equal the number of ranks (", w.size(),
               "); set --dp to ", (pp >= 1 && w.size() % pp == 0) ? w.size() / pp : 1,
               " or launch ", dp * pp, " ranks");
  Mesh m;
  m.dp = dp;
  m.pp = pp;
  m.rank = w.rank();
  m.dp_rank = m.rank % dp;
  m.pp_rank = m.rank / dp;
  m.dp_comm = w.split(m.pp_rank, m.dp_rank, "dp(pp_rank=" + std::to_string(m.pp_rank) + ")");
  m.pp_comm = w.split(m.dp_rank, m.pp_rank, "pp(dp_rank=" + std::to_string(m.dp_rank) + ")");
  return m;
}

}  // namespace loom::comm
