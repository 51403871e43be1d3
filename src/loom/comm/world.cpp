#include "loom/comm/world.h"

#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "loom/comm/c10d_backend.h"
#include "loom/comm/mpi_backend.h"
#include "loom/comm/mpi_engine.h"
#include "loom/common/error.h"
#include "loom/common/log.h"

namespace loom::comm {
namespace {
std::unique_ptr<Backend> g_world;
std::unique_ptr<StoreServer> g_store_server;  // rank 0's, when MPI bootstraps a c10d world
bool g_mpi = false;

void init_mpi(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided < MPI_THREAD_MULTIPLE)
      throw Error(
          "the MPI library does not provide MPI_THREAD_MULTIPLE; rebuild Open MPI with "
          "thread support");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  }
  g_mpi = true;
}

// Under mpirun with a c10d backend: rank 0 hosts the store, MPI tells the others where.
Rendezvous rendezvous_over_mpi() {
  Rendezvous r;
  MPI_Comm_rank(MPI_COMM_WORLD, &r.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &r.size);
  char host[256] = {};
  if (r.rank == 0) {
    g_store_server = std::make_unique<StoreServer>(r.timeout);
    r.port = g_store_server->port();
    if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "127.0.0.1");
  }
  MPI_Bcast(&r.port, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Bcast(host, sizeof host, MPI_CHAR, 0, MPI_COMM_WORLD);
  r.host = host;
  // All ranks on one host: loopback, whatever the hostname resolves to.
  char mine[256] = {};
  ::gethostname(mine, sizeof mine - 1);
  int same = std::strcmp(mine, host) == 0, all_same = 0;
  MPI_Allreduce(&same, &all_same, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (all_same) r.host = "127.0.0.1";
  return r;
}
}  // namespace

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

bool launched_by_env() {
  return std::getenv("RANK") && std::getenv("WORLD_SIZE");
}

BackendKind launch_backend() {
  if (const char* c = std::getenv("LOOM_COMM"); c && *c) return parse_backend(c);
  if (launched_by_mpi()) return BackendKind::Mpi;
  if (launched_by_env()) return BackendKind::Gloo;
  return BackendKind::Mpi;
}

void init(BackendKind kind, int* argc, char*** argv) {
  LOOM_CHECK(!g_world, "loom::comm::init() called twice");
  if (kind == BackendKind::Mpi) {
    if (launched_by_env() && !launched_by_mpi() && std::atoi(std::getenv("WORLD_SIZE")) > 1)
      LOOM_USAGE(
          "--comm mpi needs ranks started by mpirun or srun; under torchrun or "
          "`loom launch` use --comm gloo (CPU) or nccl (GPU)");
    init_mpi(argc, argv);
    g_world = std::make_unique<MpiBackend>(MPI_COMM_WORLD, "world", false);
    Engine::instance().start();
  } else if (launched_by_mpi()) {
    init_mpi(argc, argv);
    g_world = make_c10d_world(kind, rendezvous_over_mpi());
  } else {
    g_world = make_c10d_world(kind, rendezvous_from_env());
  }
  log::set_rank(g_world->rank());
}

bool initialized() {
  return g_world != nullptr;
}

void finalize() {
  if (g_mpi) Engine::instance().stop();
  g_world.reset();
  g_store_server.reset();
  if (g_mpi) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
}

void exit_alone(int code) {
  if (!initialized()) std::exit(code);
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);  // a lone rank: MPI_Abort would only add its banner
}

void abort_all(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  int initialized = 0;
  if (g_mpi) MPI_Initialized(&initialized);
  if (initialized) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

Backend& world() {
  LOOM_CHECK(g_world != nullptr, "loom::comm::init() was not called");
  return *g_world;
}

std::string mpi_library_version() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(version, &len);
  std::string v(version, strnlen(version, len));  // Open MPI counts the NUL
  if (auto nl = v.find('\n'); nl != std::string::npos) v.resize(nl);
  return v;
}

Mesh make_mesh(Backend& w, int dp, int pp, int tp) {
  if (dp < 1 || pp < 1 || tp < 1 || dp * pp * tp != w.size())
    LOOM_USAGE("dp (", dp, ") x pp (", pp, ") x tp (", tp, ") must equal the number of ranks (",
               w.size(), "); set --dp to ",
               (pp >= 1 && tp >= 1 && w.size() % (pp * tp) == 0) ? w.size() / (pp * tp) : 1,
               " or launch ", dp * pp * tp, " ranks");
  Mesh m;
  m.dp = dp;
  m.pp = pp;
  m.tp = tp;
  m.rank = w.rank();
  m.tp_rank = m.rank % tp;
  m.dp_rank = (m.rank / tp) % dp;
  m.pp_rank = m.rank / (tp * dp);
  const std::string at_pp = "pp_rank=" + std::to_string(m.pp_rank);
  const std::string at_dp = "dp_rank=" + std::to_string(m.dp_rank);
  const std::string at_tp = tp > 1 ? ",tp_rank=" + std::to_string(m.tp_rank) : "";
  m.dp_comm = w.split(m.pp_rank * tp + m.tp_rank, m.dp_rank, "dp(" + at_pp + at_tp + ")");
  m.pp_comm = w.split(m.dp_rank * tp + m.tp_rank, m.pp_rank, "pp(" + at_dp + at_tp + ")");
  m.tp_comm = w.split(m.pp_rank * dp + m.dp_rank, m.tp_rank, "tp(" + at_pp + "," + at_dp + ")");
  return m;
}

}  // namespace loom::comm
