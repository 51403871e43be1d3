#pragma once
// The c10d backends: PyTorch's Gloo and NCCL process groups behind loom's Backend interface.
// Both share one adapter (c10d_backend.cpp), so a Gloo run on CPUs exercises the code path an
// NCCL run takes on GPUs. Ranks meet through a c10d TCP store (the torchrun convention).
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "loom/comm/backend.h"

namespace loom::comm {

// Where and how the ranks of one job meet.
struct Rendezvous {
  std::string host = "127.0.0.1";  // the store's address (MASTER_ADDR)
  int port = 0;                    // MASTER_PORT
  int rank = 0;
  int size = 1;
  // True for the rank that hosts the store (rank 0 unless a launcher hosts it:
  // TORCHELASTIC_USE_AGENT_STORE=True, as torchrun and `loom launch` do).
  bool host_store = false;
  std::string prefix;  // key space of this attempt (torchrun: /worker/attempt_N)
  std::chrono::milliseconds timeout = default_timeout();
};

// Reads RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_USE_AGENT_STORE and
// TORCHELASTIC_RESTART_COUNT; throws UsageError naming what is missing or malformed. Neither
// RANK nor WORLD_SIZE set: a lone process, a world of one.
Rendezvous rendezvous_from_env();

// The world communicator of `kind` (Gloo or NCCL) for this rank.
std::unique_ptr<Backend> make_c10d_world(BackendKind kind, const Rendezvous& r);

// Whether this build can create `kind` (NCCL needs a CUDA build and a GPU).
bool c10d_available(BackendKind kind, std::string* why = nullptr);

// A TCP store server on a free port of this host, for a launcher whose ranks connect to it as
// clients (torchrun's "agent store"). Lives as long as the object.
class StoreServer {
 public:
  explicit StoreServer(std::chrono::milliseconds timeout = default_timeout());
  ~StoreServer();
  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace loom::comm
