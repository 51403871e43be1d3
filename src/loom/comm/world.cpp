#include "loom/comm/world.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "loom/comm/c10d_backend.h"
#include "loom/comm/mpi_world.h"
#include "loom/common/error.h"
#include "loom/common/log.h"

namespace loom::comm {
namespace {
std::unique_ptr<Backend> g_world;
std::unique_ptr<StoreServer> g_store_server;  // rank 0's, when MPI bootstraps a c10d world
bool g_mpi = false;
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
  if (launched_by_env() || !mpi::available()) return BackendKind::Gloo;
  return BackendKind::Mpi;
}

void init(BackendKind kind, int* argc, char*** argv) {
  LOOM_CHECK(!g_world, "loom::comm::init() called twice");
  // A write to a connection its peer closed (a Gloo communicator that timed out, a rank that
  // is gone) must fail as an error the backend reports, not kill the process: Gloo's sockets
  // expect SIGPIPE ignored, as Python does for PyTorch.
  std::signal(SIGPIPE, SIG_IGN);
  default_timeout();  // a bad LOOM_COMM_TIMEOUT_S is refused here, not at the first wait
  if (kind == BackendKind::Mpi) {
    if (launched_by_env() && !launched_by_mpi() && std::atoi(std::getenv("WORLD_SIZE")) > 1)
      LOOM_USAGE(
          "--comm mpi needs ranks started by mpirun or srun; under torchrun or "
          "`loom launch` use --comm gloo (CPU) or nccl (GPU)");
    mpi::init(argc, argv);
    g_mpi = true;
    g_world = mpi::make_world();
  } else if (launched_by_mpi() && mpi::available()) {
    mpi::init(argc, argv);
    g_mpi = true;
    g_world = make_c10d_world(kind, mpi::rendezvous(&g_store_server));
  } else {
    g_world = make_c10d_world(kind, rendezvous_from_env());
  }
  log::set_rank(g_world->rank());
}

bool initialized() {
  return g_world != nullptr;
}

void finalize() {
  if (g_mpi) mpi::stop_engine();
  g_world.reset();
  g_store_server.reset();
  if (g_mpi) mpi::finalize();
}

void exit_alone(int code) {
  if (!initialized()) std::exit(code);
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);  // a lone rank: MPI_Abort would only add its banner
}

void exit_together(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (!initialized() || g_world->size() == 1) exit_alone(code);
  try {
    g_world->barrier()->wait();
    finalize();
  } catch (const std::exception&) {
    abort_all(code);
  }
  std::exit(code);
}

void abort_all(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (g_mpi) mpi::abort_world(code);
  std::_Exit(code);
}

Backend& world() {
  LOOM_CHECK(g_world != nullptr, "loom::comm::init() was not called");
  return *g_world;
}

std::string mpi_library_version() {
  return mpi::library_version();
}

Mesh make_mesh(Backend& w, int dp, int pp, int tp, config::RankOrder order) {
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
  m.order = order;
  m.tp_rank = m.rank % tp;
  if (order == config::RankOrder::DpInside) {
    m.dp_rank = (m.rank / tp) % dp;
    m.pp_rank = m.rank / (tp * dp);
  } else {
    m.pp_rank = (m.rank / tp) % pp;
    m.dp_rank = m.rank / (tp * pp);
  }
  const std::string at_pp = "pp_rank=" + std::to_string(m.pp_rank);
  const std::string at_dp = "dp_rank=" + std::to_string(m.dp_rank);
  const std::string at_tp = tp > 1 ? ",tp_rank=" + std::to_string(m.tp_rank) : "";
  m.dp_comm = w.split(m.pp_rank * tp + m.tp_rank, m.dp_rank, "dp(" + at_pp + at_tp + ")");
  m.pp_comm = w.split(m.dp_rank * tp + m.tp_rank, m.pp_rank, "pp(" + at_dp + at_tp + ")");
  m.tp_comm = w.split(m.pp_rank * dp + m.dp_rank, m.tp_rank, "tp(" + at_pp + "," + at_dp + ")");
  return m;
}

}  // namespace loom::comm
