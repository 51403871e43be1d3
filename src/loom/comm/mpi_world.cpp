#include "loom/comm/mpi_world.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "loom/comm/mpi_backend.h"
#include "loom/comm/mpi_engine.h"
#include "loom/comm/single_copy.h"
#include "loom/common/error.h"
#include "loom/common/thread_slice.h"

namespace loom::comm::mpi {
namespace {
bool g_initialized = false;  // by us

// The world ranks on this rank's machine (those that share its memory), marked.
std::vector<bool> node_ranks() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  std::vector<bool> on(size, false);
  for (int w : world_ranks_of(node))
    if (w >= 0 && w < size) on[w] = true;
  MPI_Comm_free(&node);
  return on;
}

}  // namespace

bool available() {
  return true;
}

void init(int* argc, char*** argv) {
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
  g_initialized = true;
}

std::unique_ptr<Backend> make_world() {
  std::vector<bool> node = node_ranks();
  const int local = static_cast<int>(std::count(node.begin(), node.end(), true));
  if (!shared_memory_single_copy()) node.assign(node.size(), false);
  MpiBackend::set_quiet_world_ranks(std::move(node));
  auto w = std::make_unique<MpiBackend>(MPI_COMM_WORLD, "world", false);
  Engine::instance().start(local > usable_cores());
  return w;
}

Rendezvous rendezvous(std::unique_ptr<StoreServer>* server) {
  Rendezvous r;
  MPI_Comm_rank(MPI_COMM_WORLD, &r.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &r.size);
  char host[256] = {};
  if (r.rank == 0) {
    *server = std::make_unique<StoreServer>(r.timeout);
    r.port = (*server)->port();
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

void stop_engine() {
  if (g_initialized) Engine::instance().stop();
}

void finalize() {
  if (!g_initialized) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void abort_world(int code) {
  int initialized = 0;
  if (g_initialized) MPI_Initialized(&initialized);
  if (initialized) MPI_Abort(MPI_COMM_WORLD, code);
}

std::string library_version() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(version, &len);
  std::string v(version, strnlen(version, len));  // Open MPI counts the NUL
  if (auto nl = v.find('\n'); nl != std::string::npos) v.resize(nl);
  return v;
}

}  // namespace loom::comm::mpi
